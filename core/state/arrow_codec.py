"""Python state values <-> Arrow columns, so snapshots are Arrow files, never pickles."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from flintlock.core.keys import python_keys


def to_arrow(values: list[Any], arrow_type: pa.DataType | None, what: str) -> pa.Array:
    """An Arrow array of ``values``; a clear error if Arrow cannot represent them."""
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
