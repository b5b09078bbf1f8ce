"""Python state values <-> Arrow columns, so snapshots are Arrow files, never pickles."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from flintlock.core.api.keys import python_keys


def to_arrow(values: list[Any], arrow_type: pa.DataType | None, what: str) -> pa.Array:
    """An Arrow array of ``values``; a clear error if Arrow cannot represent them."""
    if arrow_type is not None and (
        pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type)
    ):
        joined = _joined_binary(values, arrow_type)
        if joined is not None:
            return joined
    try:
        return pa.array(values, type=arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as error:
        raise TypeError(
            f"cannot snapshot {what} as Arrow ({error}); store ints, floats, strings, "
            f"bytes, lists or dicts of them, or declare the descriptor's arrow_type"
        ) from error


def keys_to_arrow(keys: list[Any], what: str) -> pa.Array:
    """State keys as Arrow; tuple keys (``key_by([...])``) become a struct of their parts."""
    if keys and all(isinstance(key, tuple) for key in keys):
        width = len(keys[0])
        if any(len(key) != width for key in keys):
            raise TypeError(f"cannot snapshot {what}: tuple keys of different lengths")
        parts = [keys_to_arrow([key[i] for key in keys], what) for i in range(width)]
        return pa.StructArray.from_arrays(parts, names=[str(i) for i in range(width)])
    return to_arrow(keys, None, what)


def keys_from_arrow(column: pa.Array | pa.ChunkedArray) -> list[Any]:
    """State keys written by ``keys_to_arrow``: a struct column's rows become tuples again."""
    return python_keys(column)


_BINARY_LIMIT = 2**31 - 1
"""The most bytes a ``binary`` array (int32 offsets) can hold."""


def _joined_binary(values: list[Any], arrow_type: pa.DataType) -> pa.Array | None:
    """A binary array built from one joined buffer and an offsets array, with no builder
    growing by doubling (slow on fresh memory: bench/RESULTS.md, "Snapshot and restore of
    keyed state"); None if a value is not bytes-like (e.g. None) or the values overflow
    ``binary``: ``pa.array`` then decides."""
    try:
        data = b"".join(values)
    except TypeError:
        return None
    large = pa.types.is_large_binary(arrow_type)
    if not large and len(data) > _BINARY_LIMIT:
        return None
    offsets = np.zeros(len(values) + 1, dtype=np.int64 if large else np.int32)
    np.cumsum(np.fromiter(map(len, values), dtype=np.int64, count=len(values)), out=offsets[1:])
    if offsets[-1] != len(data):  # a memoryview of items wider than a byte
        return None
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(arrow_type, len(values), buffers)
