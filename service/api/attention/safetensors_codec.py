"""The safetensors layout, written with numpy alone: 8-byte little-endian header length, a JSON
header (dtype, shape, data offsets per tensor; `__metadata__` of string values), raw
little-endian data. `safetensors.numpy.load(data)` reads it; so do a few lines of JavaScript."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson

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
