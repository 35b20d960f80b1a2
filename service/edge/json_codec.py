"""Strict, fast JSON for every route: orjson both ways.

Parsing rejects NaN, Infinity, numbers that overflow to infinity (1e400) and nesting deeper
than 1024 levels (no RecursionError); encoding takes numpy arrays directly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
from flask.json.provider import JSONProvider

_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


class InvalidJSON(ValueError):
    """The body is not strict JSON; the message says where."""


def _default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):  # orjson encodes C-contiguous arrays only (a d_head-1 slice is not)
        return np.ascontiguousarray(obj)
    if hasattr(obj, "to_json"):  # values that encode themselves only when JSON is asked for
        return obj.to_json()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    raise TypeError(f"cannot encode {type(obj).__name__} as JSON")


def dumps_bytes(obj: Any) -> bytes:
    return orjson.dumps(obj, default=_default, option=_OPTIONS)


def loads_strict(data: str | bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InvalidJSON(str(exc)) from None


class OrjsonProvider(JSONProvider):
    def dumps(self, obj: Any, **kwargs: Any) -> str:
        return dumps_bytes(obj).decode()

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return loads_strict(s)

    def response(self, *args: Any, **kwargs: Any):
        obj = self._prepare_response_obj(args, kwargs)
        return self._app.response_class(dumps_bytes(obj), mimetype="application/json")  # type: ignore[arg-type]
