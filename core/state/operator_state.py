"""Operator (non-keyed) list state, redistributed by even split or union on restore.

State that belongs to a subtask rather than a key (a source's positions) has no key group
to move by, so, as in Flink, it is a list whose elements are split evenly among the new
subtasks or handed whole to each (union); broadcast state, the same on every subtask,
lives here too."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any, Generic

import pyarrow as pa

from flintlock.core.checkpoint.snapshots import StateFile
from flintlock.core.checkpoint.storage import CheckpointStorage, safe_name
from flintlock.core.errors import ReadOnlyStateError
from flintlock.core.state.arrow_codec import to_arrow
from flintlock.core.state.descriptors import ListStateDescriptor
from flintlock.core.state.handles import K, ListState, T


class _OperatorListState(ListState[T]):
    def __init__(self) -> None:
        self.elements: list[T] = []

    def get(self) -> list[T]:
        return list(self.elements)

    def add(self, value: T) -> None:
        self.elements.append(value)

    def update(self, values: Iterable[T]) -> None:
        self.elements = list(values)

    def clear(self) -> None:
        self.elements = []


class BroadcastState(Generic[K, T]):
    """A map every subtask of an operator holds the same copy of (Flink's broadcast state):
    written only by the broadcast side, read by the other."""

    def __init__(self) -> None:
        self.entries: dict[K, T] = {}

    def get(self, key: K) -> T | None:
        """The value of ``key``, or None."""
        return self.entries.get(key)

    def contains(self, key: K) -> bool:
        """True if ``key`` has a value."""
        return key in self.entries

    def items(self) -> Iterator[tuple[K, T]]:
        """(key, value) pairs (a copy: safe to modify the state meanwhile)."""
        return iter(list(self.entries.items()))

    def put(self, key: K, value: T) -> None:
        """Set the value of ``key``."""
        self.entries[key] = value

    def remove(self, key: K) -> None:
        """Forget ``key``."""
        self.entries.pop(key, None)

    def clear(self) -> None:
        """Forget every entry."""
        self.entries.clear()


class ReadOnlyBroadcastState(Generic[K, T]):
    """The broadcast state as the non-broadcast side sees it: read, never write."""

    __slots__ = ("_state",)

    def __init__(self, state: BroadcastState[K, T]) -> None:
        self._state = state

    def get(self, key: K) -> T | None:
        """The value of ``key``, or None."""
        return self._state.get(key)

    def contains(self, key: K) -> bool:
        """True if ``key`` has a value."""
        return self._state.contains(key)

    def items(self) -> Iterator[tuple[K, T]]:
        """(key, value) pairs."""
        return self._state.items()

    def put(self, key: K, value: T) -> None:
        """Refused: only the broadcast side writes, so every subtask's copy stays equal."""
        raise ReadOnlyStateError(
            "the broadcast state is read-only in process_element; update it in "
            "process_broadcast_element, which every subtask runs for every broadcast row"
        )

    remove = clear = put


class OperatorStateStore:
    """The operator list states of one operator in one subtask."""

    def __init__(self, subtask_index: int, parallelism: int) -> None:
        self.subtask_index = subtask_index
        self.parallelism = parallelism
        self._states: dict[str, tuple[ListStateDescriptor[Any], str, _OperatorListState[Any]]] = {}
        self._broadcast: dict[str, BroadcastState[Any, Any]] = {}
        # state name -> [(old subtask index, old parallelism, its values when asked)]
        self._restored: dict[str, list[tuple[int, int, Callable[[], list[Any]]]]] = {}

    def get_list_state(self, descriptor: ListStateDescriptor[T]) -> ListState[T]:
        """List state split evenly over subtasks when parallelism changes."""
        return self._get(descriptor, "split")

    def get_union_list_state(self, descriptor: ListStateDescriptor[T]) -> ListState[T]:
        """List state that every subtask restores whole (the union of all subtasks)."""
        return self._get(descriptor, "union")

    def get_broadcast_state(self, name: str) -> BroadcastState[Any, Any]:
        """The broadcast (map) state ``name``; on restore every subtask takes the copy of
        one old subtask (all copies are equal)."""
        known = self._broadcast.get(name)
        if known is not None:
            return known
        if name in self._states:
            raise ValueError(f"operator state '{name}' was declared as list state")
        state: BroadcastState[Any, Any] = BroadcastState()
        restored = self._restored.pop(name, None)
        if restored is not None:
            old = sorted(restored, key=lambda r: r[0])
            mine = old[self.subtask_index % len(old)][2]()
            state.entries = {entry["key"]: entry["value"] for entry in mine}
        self._broadcast[name] = state
        return state

    def has_restored(self, name: str) -> bool:
        """True if a restored snapshot holds values of state ``name`` not yet declared."""
        return name in self._restored

    def has_state(self, name: str) -> bool:
        """True if state ``name`` was declared in this subtask."""
        return name in self._states

    def _get(self, descriptor: ListStateDescriptor[T], mode: str) -> ListState[T]:
        known = self._states.get(descriptor.name)
        if known is not None:
            if known[1] != mode:
                raise ValueError(f"operator state '{descriptor.name}' was declared as {known[1]}")
            return known[2]
        state: _OperatorListState[T] = _OperatorListState()
        restored = self._restored.pop(descriptor.name, None)
        if restored is not None:
            state.elements = self._redistribute(mode, sorted(restored, key=lambda r: r[0]))
        self._states[descriptor.name] = (descriptor, mode, state)
        return state

    def _redistribute(
        self, mode: str, restored: list[tuple[int, int, Callable[[], list[Any]]]]
    ) -> list[Any]:
        if mode != "union" and all(p == self.parallelism for _, p, _ in restored):
            # unchanged parallelism: each subtask keeps exactly what it snapshotted (and
            # reads no other subtask's file: a request each on an object store)
            own = self.subtask_index
            return [v for index, _, values in restored if index == own for v in values()]
        everything = [value for _, _, values in restored for value in values()]
        if mode == "union":
            return everything
        size, extra = divmod(len(everything), self.parallelism)
        start = self.subtask_index * size + min(self.subtask_index, extra)
        return everything[start : start + size + (self.subtask_index < extra)]

    def snapshot(self, storage: CheckpointStorage, directory: str) -> list[StateFile]:
        """One Arrow file per state, with a single ``value`` column."""
        files = []
        for name, (descriptor, mode, state) in self._states.items():
            column = to_arrow(state.elements, descriptor.arrow_type, f"operator state '{name}'")
            path = f"{directory}/operator-{safe_name(name)}.arrow"
            storage.write_table(path, pa.table({"value": column}))
            files.append(StateFile(name, "list", path, mode))
        for name, broadcast in self._broadcast.items():
            entries = [{"key": k, "value": v} for k, v in broadcast.entries.items()]
            column = to_arrow(entries, None, f"broadcast state '{name}'")
            path = f"{directory}/broadcast-{safe_name(name)}.arrow"
            storage.write_table(path, pa.table({"value": column}))
            files.append(StateFile(name, "broadcast", path, "broadcast"))
        return files

    def restore(
        self, storage: CheckpointStorage, old_subtasks: list[tuple[int, int, list[StateFile]]]
    ) -> None:
        """Remember restored states until they are declared (then redistributed): each
        file is read when its values are needed, once.

        ``old_subtasks`` holds (old subtask index, old parallelism, files) per snapshot.
        """
        for old_index, old_parallelism, files in old_subtasks:
            for file in files:
                entry = (old_index, old_parallelism, partial(_values_of, storage, file.path))
                self._restored.setdefault(file.name, []).append(entry)


def _values_of(storage: CheckpointStorage, path: str) -> list[Any]:
    """The values of a restored operator state's file."""
    return list(storage.read_table(path).column("value").to_pylist())
