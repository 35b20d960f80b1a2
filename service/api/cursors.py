"""Opaque pagination cursors: URL-safe base64 of a position the service chose."""

from __future__ import annotations

import base64
import binascii

from .problems import Problem


def encode(position: str) -> str:
    return base64.urlsafe_b64encode(position.encode()).decode().rstrip("=")


def decode(cursor: str, field: str = "cursor") -> str:
    """The position inside a cursor, or a 400 naming the field."""
    try:
        return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise invalid(field) from None


def invalid(field: str = "cursor") -> Problem:
    return Problem(
        400, "the cursor is not one this service gave out", errors={field: ["invalid cursor"]}, slug="invalid-cursor"
    )
