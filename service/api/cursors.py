"""Opaque pagination cursors: a position the service chose, signed (HMAC-SHA256 with the app's
secret), so a client can neither forge nor alter one; each kind of position is parsed strictly."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import hmac
import re

from flask import current_app

from ..edge.problems import Problem

SIGNATURE_BYTES = 12
MAX_ROW_ID = 2**63 - 1  # BIGINT
_DIGITS = re.compile(r"[0-9]{1,19}")  # ASCII digits only: str.isdigit() accepts "٣" and "²"


def encode(position: str) -> str:
    raw = position.encode()
    return base64.urlsafe_b64encode(_sign(raw) + raw).decode().rstrip("=")


def decode(cursor: str, field: str = "cursor") -> str:
    """The position inside a cursor this service gave out, or a 400 naming the field."""
    try:
        data = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except (ValueError, binascii.Error):
        raise invalid(field) from None
    signature, raw = data[:SIGNATURE_BYTES], data[SIGNATURE_BYTES:]
    if len(data) <= SIGNATURE_BYTES or not hmac.compare_digest(signature, _sign(raw)):
        raise invalid(field)
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise invalid(field) from None


def row_id(text: str, field: str = "cursor") -> int:
    """A table row id: ASCII digits within BIGINT."""
    if not _DIGITS.fullmatch(text) or int(text) > MAX_ROW_ID:
        raise invalid(field)
    return int(text)


def moment_and_row(text: str, field: str) -> tuple[dt.datetime, int]:
    """ "<ISO time with zone>|<row id>", as the export writes it."""
    stored, _, row = text.partition("|")
    try:
        when = dt.datetime.fromisoformat(stored)
    except ValueError:
        raise invalid(field) from None
    if when.tzinfo is None:
        raise invalid(field)
    return when, row_id(row, field)


def invalid(field: str = "cursor") -> Problem:
    return Problem(
        400, "the cursor is not one this service gave out", errors={field: ["invalid cursor"]}, slug="invalid-cursor"
    )


def _sign(raw: bytes) -> bytes:
    key = current_app.extensions["settings"].secret_key.encode()
    return hmac.new(key, b"cursor:" + raw, hashlib.sha256).digest()[:SIGNATURE_BYTES]
