"""Python state values <-> Arrow columns, so snapshots are Arrow files, never pickles."""

from __future__ import annotations

from typing import Any

import pyarrow as pa


def to_arrow(values: list[Any], arrow_type: pa.DataType | None, what: str) -> pa.Array:
    """An Arrow array of ``values``; a clear error if Arrow cannot represent them."""
    try:
        return pa.array(values, type=arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as error:
        raise TypeError(
            f"cannot snapshot {what} as Arrow ({error}); store ints, floats, strings, "
            f"bytes, lists or dicts of them, or declare the descriptor's arrow_type"
        ) from error
