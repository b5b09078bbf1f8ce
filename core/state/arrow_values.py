"""Value state a batch at a time, held as Arrow: a key's nested value (a struct, a list)
stays a row of the array that brought it until a per-record call asks for it as Python.

Converting a struct row to a dict and back costs microseconds per row, the whole cost of
a batch-level join's lookups (Nexmark q20's auction side); a reference to the row costs
a Python object per key. Only on backends that keep what they are given (``hashmap``)
and for states without TTL; a snapshot gathers the rows into its column and the stored
values are re-pointed at it, so no batch stays alive for one key's row."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from flintlock.core.state.arrow_codec import to_arrow


class ArrowValue:
    """One key's value: row ``index`` of ``array``."""

    __slots__ = ("array", "index")

    def __init__(self, array: pa.Array, index: int) -> None:
        self.array, self.index = array, index

    def as_py(self) -> Any:
        return self.array[self.index].as_py()


def holds_as_arrow(arrow_type: pa.DataType | None) -> bool:
    """Whether values of ``arrow_type`` are worth holding as Arrow (nested ones are)."""
    return arrow_type is not None and pa.types.is_nested(arrow_type)


def arrow_values(
    values: pa.Array | pa.ChunkedArray, arrow_type: pa.DataType
) -> list[ArrowValue | None]:
    """Each row of ``values`` as a stored value (None for a null: the key is cleared)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if values.type != arrow_type:
        values = values.cast(arrow_type)
    held: list[ArrowValue | None] = [ArrowValue(values, index) for index in range(len(values))]
    if values.null_count:
        for index in np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False)):
            held[index] = None
    return held


def value_column(stored: list[Any], arrow_type: pa.DataType | None, what: str) -> pa.Array:
    """A column of ``stored`` values (ArrowValues, Python values, None): the rows of each
    source array taken at once, the Python values converted together, then put in order
    (no Python call per row beyond reading each row's place)."""
    held = np.array([type(value) is ArrowValue for value in stored], dtype=bool)
    if not held.any():
        return to_arrow(stored, arrow_type, what)
    rows = stored if held.all() else [v for v, h in zip(stored, held.tolist(), strict=True) if h]
    arrays = [value.array for value in rows]
    arrow_type = arrow_type or arrays[0].type
    indices = np.array([value.index for value in rows], dtype=np.int64)
    if len(rows) == len(stored) == len(arrays[0]) and _is_whole(arrays, indices):
        return _conform(arrays[0], arrow_type, what)  # the column the last snapshot wrote
    sources = np.array([id(array) for array in arrays], dtype=np.uint64)
    order = np.argsort(sources, kind="stable")  # rows of one source array together
    grouped = sources[order]
    bounds = [*np.flatnonzero(grouped[1:] != grouped[:-1]) + 1, len(rows)]
    pieces, start = [], 0
    for end in bounds:
        taken = indices[order[start:end]]
        pieces.append(_conform(arrays[order[start]].take(pa.array(taken)), arrow_type, what))
        start = end
    places = np.flatnonzero(held)[order]  # where each taken row goes
    if len(rows) < len(stored):
        python = [v for v, h in zip(stored, held.tolist(), strict=True) if not h]
        pieces.append(to_arrow(python, arrow_type, what))
        places = np.concatenate([places, np.flatnonzero(~held)])
    inverse = np.empty(len(stored), dtype=np.int64)
    inverse[places] = np.arange(len(stored))
    return pa.concat_arrays(pieces).take(pa.array(inverse))


def _is_whole(arrays: list[pa.Array], indices: np.ndarray) -> bool:
    """Whether the rows are every row of one array, in order (nothing to take)."""
    first = arrays[0]
    return bool((indices == np.arange(len(indices))).all()) and all(a is first for a in arrays)


def _conform(rows: pa.Array, arrow_type: pa.DataType, what: str) -> pa.Array:
    """``rows`` as ``arrow_type``: rows restored from before the type evolved (a struct
    that gained a nullable field) are cast, or converted as Python values would be."""
    if rows.type == arrow_type:
        return rows
    try:
        return rows.cast(arrow_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return to_arrow(rows.to_pylist(), arrow_type, what)


def restores_as_arrow(kind: str, table: pa.Table, holds_arrow: bool) -> bool:
    """Whether a state file's values restore as Arrow rows (nested values of a value
    state without TTL, on a backend that holds Arrow)."""
    return (
        holds_arrow
        and kind == "value"
        and "ttl_timestamp" not in table.column_names
        and holds_as_arrow(table.schema.field("value").type)
    )


def repointed(column: pa.Array) -> list[ArrowValue]:
    """The stored values of a column just read: rows of that column."""
    return [ArrowValue(column, index) for index in range(len(column))]


def repoint(stored: list[Any], column: pa.Array) -> dict[int, ArrowValue]:
    """Point the stored values of a column just written at its rows: a held row in place
    (no object made, nothing stored again), a Python value as a new row, returned by its
    place to be stored."""
    fresh: dict[int, ArrowValue] = {}
    for index, value in enumerate(stored):
        if type(value) is ArrowValue:
            value.array, value.index = column, index
        else:
            fresh[index] = ArrowValue(column, index)
    return fresh
