"""Key selectors: which key a record has (Flink's KeySelector), per batch or per record.

A key is one column (``key_by("user")``), several columns (``key_by(["user", "day"])``,
whose key is a tuple), or a function of the row (``key_by(lambda row: ...)``, the slow
path: called once per record, on both sides of the exchange). Routing and keyed state
agree on every key's group: columns are hashed vectorised, single keys by
``key_groups.key_group_of``, and both give the same group for the same key.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from flintlock.core.exchange.key_groups import key_group_of
from flintlock.core.exchange.murmur import key_groups_of
from flintlock.core.runtime.records import column_values, rows_of

if TYPE_CHECKING:
    from flintlock.core.api.functions import Row

KeyFunction = Callable[["Row"], Hashable]
"""A key selector function: the key of one row."""


class KeySelector:
    """Extracts the key of each record. Subclass it and override ``get_key`` (per record)
    or ``key_array`` (per batch: an Arrow array of keys, a struct array for tuple keys)."""

    columns: tuple[str, ...] | None = None
    """The columns the key is read from, if known (checked against the stream's schema)."""

    def get_key(self, row: Row) -> Hashable:
        """The key of one record (slow path): an int, str, bytes, bool or a tuple of them."""
        raise NotImplementedError(f"{type(self).__name__} overrides neither get_key nor key_array")

    def key_array(self, batch: pa.RecordBatch) -> pa.Array | None:
        """The keys of a whole batch as an Arrow array (fast path); None: use ``get_key``."""
        return None

    def keys(self, batch: pa.RecordBatch) -> list[Hashable]:
        """The key of every row of ``batch`` as Python values (tuples for composite keys)."""
        array = self.key_array(batch)
        if array is None:
            get_key = self.get_key
            return [get_key(row) for row in rows_of(batch)]
        return python_keys(array)

    def key_groups(self, batch: pa.RecordBatch, max_parallelism: int) -> np.ndarray:
        """The key group of every row of ``batch`` (for routing)."""
        array = self.key_array(batch)
        if array is not None:
            return key_groups_of(array, max_parallelism)
        return np.fromiter(
            (key_group_of(key, max_parallelism) for key in self.keys(batch)),
            dtype=np.int32,
            count=batch.num_rows,
        )

    def describe(self) -> str:
        """How the key is chosen, for messages and plans."""
        return type(self).__name__


class ColumnKey(KeySelector):
    """The key is the value of one column."""

    def __init__(self, column: str) -> None:
        self.column = column
        self.columns: tuple[str, ...] = (column,)

    def get_key(self, row: Row) -> Hashable:
        key: Hashable = row[self.column]  # a row's values are Any
        return key

    def key_array(self, batch: pa.RecordBatch) -> pa.Array:
        return batch.column(self.column)

    def keys(self, batch: pa.RecordBatch) -> list[Hashable]:
        return column_values(batch.column(self.column))

    def describe(self) -> str:
        return repr(self.column)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ColumnKey) and other.column == self.column

    def __hash__(self) -> int:
        return hash(("column", self.column))


class ColumnsKey(KeySelector):
    """The key is the tuple of several columns' values, hashed as one combined key."""

    columns: tuple[str, ...]

    def __init__(self, columns: Sequence[str]) -> None:
        self.columns = tuple(columns)

    def get_key(self, row: Row) -> Hashable:
        return tuple(row[name] for name in self.columns)

    def key_array(self, batch: pa.RecordBatch) -> pa.Array:
        parts = [batch.column(name) for name in self.columns]
        return pa.StructArray.from_arrays(parts, names=[str(i) for i in range(len(parts))])

    def keys(self, batch: pa.RecordBatch) -> list[Hashable]:
        return list(zip(*(batch.column(name).to_pylist() for name in self.columns), strict=True))

    def describe(self) -> str:
        return repr(list(self.columns))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ColumnsKey) and other.columns == self.columns

    def __hash__(self) -> int:
        return hash(("columns", self.columns))


class FunctionKey(KeySelector):
    """The key is what a function of the row (a dict) returns: the per-record slow path."""

    def __init__(self, function: KeyFunction) -> None:
        self.function = function

    def get_key(self, row: Row) -> Hashable:
        return self.function(row)

    def describe(self) -> str:
        name = getattr(self.function, "__qualname__", None) or type(self.function).__name__
        return f"key selector {name}"


def python_keys(array: pa.Array | pa.ChunkedArray) -> list[Any]:
    """Arrow keys as Python values; a struct array's rows become tuples (composite keys)."""
    if pa.types.is_struct(array.type):
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        return list(zip(*(python_keys(part) for part in array.flatten()), strict=True))
    keys: list[Any] = array.to_pylist()  # pyarrow is untyped: its values are Any
    return keys
