"""Operator (non-keyed) list state, redistributed by even split or union on restore."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from flintlock.core.checkpoint_storage import CheckpointStorage, safe_name
from flintlock.core.snapshots import StateFile
from flintlock.core.state.arrow_codec import to_arrow
from flintlock.core.state.descriptors import ListStateDescriptor
from flintlock.core.state.handles import ListState


class _OperatorListState(ListState):
    def __init__(self) -> None:
        self.values: list[Any] = []

    def get(self) -> list[Any]:
        return list(self.values)

    def add(self, value: Any) -> None:
        self.values.append(value)

    def update(self, values: Iterable[Any]) -> None:
        self.values = list(values)

    def clear(self) -> None:
        self.values = []


class OperatorStateStore:
    """The operator list states of one operator in one subtask."""

    def __init__(self, subtask_index: int, parallelism: int) -> None:
        self.subtask_index = subtask_index
        self.parallelism = parallelism
        self._states: dict[str, tuple[ListStateDescriptor, str, _OperatorListState]] = {}
        # state name -> [(old subtask index, old parallelism, values)]
        self._restored: dict[str, list[tuple[int, int, list[Any]]]] = {}

    def get_list_state(self, descriptor: ListStateDescriptor) -> ListState:
        """List state split evenly over subtasks when parallelism changes."""
        return self._get(descriptor, "split")

    def get_union_list_state(self, descriptor: ListStateDescriptor) -> ListState:
        """List state that every subtask restores whole (the union of all subtasks)."""
        return self._get(descriptor, "union")

    def has_restored(self, name: str) -> bool:
        """True if a restored snapshot holds values of state ``name`` not yet declared."""
        return name in self._restored

    def has_state(self, name: str) -> bool:
        """True if state ``name`` was declared in this subtask."""
        return name in self._states

    def _get(self, descriptor: ListStateDescriptor, mode: str) -> ListState:
        known = self._states.get(descriptor.name)
        if known is not None:
            if known[1] != mode:
                raise ValueError(f"operator state '{descriptor.name}' was declared as {known[1]}")
            return known[2]
        state = _OperatorListState()
        restored = self._restored.pop(descriptor.name, None)
        if restored is not None:
            state.values = self._redistribute(mode, sorted(restored, key=lambda r: r[0]))
        self._states[descriptor.name] = (descriptor, mode, state)
        return state

    def _redistribute(self, mode: str, restored: list[tuple[int, int, list[Any]]]) -> list[Any]:
        everything = [value for _, _, values in restored for value in values]
        if mode == "union":
            return everything
        if all(old_parallelism == self.parallelism for _, old_parallelism, _ in restored):
            # unchanged parallelism: each subtask keeps exactly what it snapshotted
            own = self.subtask_index
            return [v for index, _, values in restored if index == own for v in values]
        size, extra = divmod(len(everything), self.parallelism)
        start = self.subtask_index * size + min(self.subtask_index, extra)
        return everything[start : start + size + (self.subtask_index < extra)]

    def snapshot(self, storage: CheckpointStorage, directory: str) -> list[StateFile]:
        """One Arrow file per state, with a single ``value`` column."""
        files = []
        for name, (descriptor, mode, state) in self._states.items():
            column = to_arrow(state.values, descriptor.arrow_type, f"operator state '{name}'")
            path = f"{directory}/operator-{safe_name(name)}.arrow"
            storage.write_table(path, pa.table({"value": column}))
            files.append(StateFile(name, "list", path, mode))
        return files

    def restore(
        self, storage: CheckpointStorage, old_subtasks: list[tuple[int, int, list[StateFile]]]
    ) -> None:
        """Remember restored values until the state is declared (then redistributed).

        ``old_subtasks`` holds (old subtask index, old parallelism, files) per snapshot.
        """
        for old_index, old_parallelism, files in old_subtasks:
            for file in files:
                values = storage.read_table(file.path).column("value").to_pylist()
                entry = (old_index, old_parallelism, values)
                self._restored.setdefault(file.name, []).append(entry)
