"""Keyed state <-> Arrow: the columns of a keyed state's snapshot file.

One Arrow IPC file per state, one row per key (one row per map entry for map state):

- ``key_group`` int32, ``key`` (a struct of the parts for tuple keys);
- ``map_key`` — map state only;
- ``value``: the value (value, reducing state), the accumulator (aggregating state),
  the list of elements (list state), the entry's value (map state);
- ``ttl_timestamp`` int64 (a list of int64 for list state) — only for states with a TTL:
  the last-access time of the value, of each element or of each entry, in epoch ms.

Expired entries are not written; keys with nothing left are not written. Every table
backend writes this one layout, so a snapshot of one backend restores on the other, and
the key group column lets a restore at another parallelism keep only the groups it owns."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flintlock.core.exchange.murmur import key_groups_of
from flintlock.core.state.arrow_codec import keys_from_arrow, keys_to_arrow, to_arrow
from flintlock.core.state.arrow_values import repointed, restores_as_arrow, value_column
from flintlock.core.state.keyed_lists import arrow_elements, list_column

TTL_COLUMN = "ttl_timestamp"


def _live(kind: str, stored: Any, ttl_ms: int | None, now: int) -> Any:
    """``stored`` without its expired parts (None if nothing is left)."""
    if ttl_ms is None:
        return stored
    if kind == "list":
        return [pair for pair in stored if pair[1] + ttl_ms > now] or None
    if kind == "map":
        return {k: pair for k, pair in stored.items() if pair[1] + ttl_ms > now} or None
    return stored if stored[1] + ttl_ms > now else None


def encode(
    name: str,
    kind: str,
    keys: list[Any],
    stored: list[Any],
    key_groups: np.ndarray | list[int] | None,
    max_parallelism: int,
    types: tuple[pa.DataType | None, pa.DataType | None],
    ttl_ms: int | None,
    now: int,
    arrow_rows: bool = False,
) -> pa.RecordBatch | None:
    """One batch of a state's file for ``keys`` and their stored values (None if empty).

    ``types`` are the value's and the map key's Arrow types (None: inferred);
    ``ttl_ms`` is None for states without TTL (their stored values are not pairs);
    ``arrow_rows``: a value state's stored values may be Arrow rows (``arrow_values``)."""
    what = f"state '{name}'"
    if ttl_ms is not None:
        kept = [(i, s) for i, s in enumerate(_live(kind, s, ttl_ms, now) for s in stored)]
        kept = [(i, s) for i, s in kept if s is not None]
        if len(kept) != len(keys):
            keys = [keys[i] for i, _ in kept]
            if key_groups is not None:
                key_groups = np.asarray(key_groups)[[i for i, _ in kept]]
            stored = [s for _, s in kept]
    if not keys:
        return None
    key_array = keys_to_arrow(keys, f"keys of {what}")
    groups = (
        np.asarray(key_groups, dtype=np.int32)
        if key_groups is not None
        else key_groups_of(key_array, max_parallelism)
    )
    value_type, map_key_type = types
    columns: dict[str, pa.Array] = {}
    if kind == "map":
        counts = np.fromiter((len(s) for s in stored), dtype=np.int64, count=len(stored))
        rows = np.repeat(np.arange(len(keys)), counts)
        columns["key_group"] = pa.array(groups[rows], pa.int32())
        columns["key"] = key_array.take(pa.array(rows))
        entries = [entry for s in stored for entry in s.items()]
        columns["map_key"] = to_arrow([k for k, _ in entries], map_key_type, f"map keys of {what}")
        values = [v for _, v in entries]
    else:
        columns["key_group"] = pa.array(groups, pa.int32())
        columns["key"] = key_array
        values = stored
    if kind == "list" and value_type is not None:
        value_type = pa.list_(value_type)
    if ttl_ms is None and kind == "list":
        columns["value"] = list_column(values, value_type, what)
    elif arrow_rows:
        columns["value"] = value_column(values, value_type, what)
    elif ttl_ms is None:
        columns["value"] = to_arrow(values, value_type, what)
    elif kind == "list":
        columns["value"] = to_arrow([[v for v, _ in s] for s in values], value_type, what)
        columns[TTL_COLUMN] = pa.array([[t for _, t in s] for s in values], pa.list_(pa.int64()))
    else:
        columns["value"] = to_arrow([v for v, _ in values], value_type, what)
        columns[TTL_COLUMN] = pa.array([t for _, t in values], pa.int64())
    return pa.RecordBatch.from_pydict(columns)


def owned_rows(table: pa.Table, key_groups: range) -> pa.Table:
    """The rows of ``table`` whose key group is in ``key_groups`` (one vectorised filter)."""
    groups = table.column("key_group")
    bounds = pc.min_max(groups)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low is None or (low >= key_groups.start and high < key_groups.stop):
        return table  # every row is ours (no rescale): no copy
    mask = pc.and_(pc.greater_equal(groups, key_groups.start), pc.less(groups, key_groups.stop))
    return table.filter(mask)


@dataclass(frozen=True)
class RestoredEntries:
    """A state file's rows as columns (key groups, keys, stored values); iterating gives
    (key group, key, stored value) triples, columns let a backend load without them."""

    groups: list[int]
    keys: list[Hashable]
    stored: list[Any]

    def __iter__(self) -> Iterator[tuple[int, Hashable, Any]]:
        return zip(self.groups, self.keys, self.stored, strict=True)

    def __len__(self) -> int:
        return len(self.keys)


def decode(kind: str, table: pa.Table, arrow_lists: bool = False) -> RestoredEntries:
    """The keys of a state file's rows with their stored values (a map state's rows are
    gathered into one dict per key; with ``arrow_lists`` a list state's lists stay Arrow)."""
    has_ttl = TTL_COLUMN in table.column_names
    groups = table.column("key_group").to_pylist()
    keys = keys_from_arrow(table.column("key"))
    if arrow_lists and kind == "list" and not has_ttl:
        return RestoredEntries(groups, keys, arrow_elements(table.column("value")))
    if restores_as_arrow(kind, table, arrow_lists):
        return RestoredEntries(groups, keys, repointed(table.column("value").combine_chunks()))
    values = table.column("value").to_pylist()
    stamps = table.column(TTL_COLUMN).to_pylist() if has_ttl else None
    if kind == "map":
        maps: dict[Any, tuple[int, dict[Any, Any]]] = {}
        map_keys = keys_from_arrow(table.column("map_key"))
        for i, (group, key, map_key) in enumerate(zip(groups, keys, map_keys, strict=True)):
            entry = (values[i], stamps[i]) if stamps is not None else values[i]
            maps.setdefault(key, (group, {}))[1][map_key] = entry
        return RestoredEntries(
            [group for group, _ in maps.values()], list(maps), [m for _, m in maps.values()]
        )
    if stamps is None:
        return RestoredEntries(groups, keys, values)
    if kind == "list":
        stored = [list(zip(e, t, strict=True)) for e, t in zip(values, stamps, strict=True)]
        return RestoredEntries(groups, keys, stored)
    return RestoredEntries(groups, keys, list(zip(values, stamps, strict=True)))


def has_ttl(table: pa.Table) -> bool:
    """True if a state file was written for a state with a TTL."""
    return TTL_COLUMN in table.column_names
