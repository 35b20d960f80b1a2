"""The safetensors layout, written with numpy alone: 8-byte little-endian header length, a JSON
header (dtype, shape, data offsets per tensor; `__metadata__` of string values), raw
little-endian data. `safetensors.numpy.load(data)` reads it; so do a few lines of JavaScript."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson

from ...trace_json import MaskedScores

DTYPES = {"f8": "F64", "f4": "F32", "i8": "I64", "b1": "BOOL"}
ALIGN = 8  # the header is padded with spaces so the data starts 8-byte aligned


def encode(tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> bytes:
    out = bytearray()
    write(out.extend, tensors, metadata)
    return bytes(out)


def write(sink: Callable[[Any], Any], tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
    """The layout, piece by piece into `sink` (a file's write, a bytearray's extend): each
    tensor's own buffer, no copy of the whole answer in memory."""
    header: dict[str, object] = {"__metadata__": metadata}
    buffers, offset = [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))  # a view when it already is
        kind = f"{array.dtype.kind}{array.dtype.itemsize}"
        header[name] = {
            "dtype": DTYPES[kind],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + data.nbytes],
        }
        buffers.append(data)
        offset += data.nbytes
    text = orjson.dumps(header)
    text += b" " * (-(len(text) + 8) % ALIGN)
    sink(struct.pack("<Q", len(text)) + text)
    for data in buffers:
        sink(data.data.cast("B"))  # the array's own buffer, as bytes


def body_tensors(body: dict[str, Any], dtype: str = "float64") -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """A trace or comparison body as named tensors plus metadata, for the safetensors layout.

    Every array becomes a tensor named by its path in the JSON body (`heads.1.weights`,
    `differences.concat`); every other value becomes a JSON string in the metadata under its
    path. `masked_scores` (JSON null where masked) becomes a boolean `mask` beside the scores.
    `dtype="float32"` halves the bytes of every floating-point tensor."""
    tensors: dict[str, np.ndarray] = {}
    metadata: dict[str, str] = {}
    float_type = np.float32 if dtype == "float32" else np.float64

    def walk(value: Any, path: str) -> None:
        if isinstance(value, np.ndarray):
            kind = value.dtype.kind
            tensors[path] = value.astype(float_type if kind == "f" else np.int64 if kind in "iu" else bool, copy=False)
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{path}.{key}" if path else key)
        elif isinstance(value, MaskedScores):
            # Null where masked, in JSON; here a boolean mask beside the scores (same for every head).
            tensors[path.split("heads.")[0] + "mask"] = np.asarray(value.mask, dtype=bool)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for i, item in enumerate(value):
                walk(item, f"{path}.{i}")
        else:
            metadata[path] = orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY).decode()

    walk(body, "")
    return tensors, metadata
