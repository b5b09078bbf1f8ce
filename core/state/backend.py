"""The state backend interface: keyed state scoped by key group, snapshotted to storage.

Backends are plugins (``hashmap`` in memory, ``sqlite`` on disk), so the runtime sees only
this interface. State is scoped by key group as in Flink, so that a restore at another
parallelism hands each subtask whole key groups, and every key is checked to belong to the
subtask's key groups when it becomes current."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Iterator

from flintlock.core.checkpoint.snapshots import StateFile
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.exchange.key_groups import key_group_of
from flintlock.core.runtime.processing_time import Clock
from flintlock.core.state.descriptors import HandleT, StateDescriptor
from flintlock.core.state.ttl import wall_clock_ms

KEY_GROUP_CACHE_SIZE = 1 << 16
"""Keys whose key group is remembered; the cache starts over when full (memory bound)."""


class KeyedStateBackend(ABC):
    """Keyed state of one operator in one subtask, for the key groups it owns.

    ``ttl_clock`` is the processing-time clock TTL reads (epoch ms; a harness injects a
    ``ManualClock``)."""

    ttl_clock: Clock = staticmethod(wall_clock_ms)

    holds_arrow_lists = False
    """True if the backend's tables keep stored objects as they are, so that list state may
    hold batch-added elements as Arrow slices (``keyed_lists``) and value state nested
    values as rows of Arrow arrays (``arrow_values``); False for a backend that serialises
    what it stores."""

    def __init__(self, key_groups: range, max_parallelism: int) -> None:
        self.key_groups = key_groups
        self.max_parallelism = max_parallelism
        self.current_key: Hashable = None
        self._key_group_cache: dict[Hashable, int] = {}
        self.arrow_valued: set[str] = set()
        """Value states whose stored values may be rows of Arrow arrays (``arrow_values``)."""

    @property
    def current_key_group(self) -> int:
        """The current key's key group (-1 before any key)."""
        return -1 if self.current_key is None else self.key_group(self.current_key)

    def set_current_key(self, key: Hashable) -> None:
        """Scope state access to ``key``; it must belong to this subtask's key groups."""
        key_group = self._key_group_cache.get(key)
        if key_group is None:
            key_group = key_group_of(key, self.max_parallelism)
            if key_group not in self.key_groups:
                raise ValueError(
                    f"key {key!r} is in key group {key_group}, not in this subtask's "
                    f"{self.key_groups.start}..{self.key_groups.stop - 1}"
                )
            if len(self._key_group_cache) >= KEY_GROUP_CACHE_SIZE:
                self._key_group_cache.clear()
            self._key_group_cache[key] = key_group
        self.current_key = key

    def check_keys(self, keys: Iterable[Hashable]) -> None:
        """Check once per batch that every key is this subtask's (as set_current_key does),
        so that a per-record loop may set ``current_key`` itself; leaves the last new key
        current."""
        for key in set(keys).difference(self._key_group_cache):
            self.set_current_key(key)

    def key_group(self, key: Hashable) -> int:
        """The key group of a key seen by this backend (cached)."""
        cached = self._key_group_cache.get(key)
        return cached if cached is not None else key_group_of(key, self.max_parallelism)

    @abstractmethod
    def get_state(self, descriptor: StateDescriptor[HandleT]) -> HandleT:
        """The state handle for ``descriptor`` (the same handle on each call)."""

    @abstractmethod
    def snapshot(self, storage: CheckpointStorage, directory: str) -> list[StateFile]:
        """Write every state to ``directory``; one Arrow file per state."""

    @abstractmethod
    def restore(self, storage: CheckpointStorage, files: list[StateFile]) -> None:
        """Load the rows of ``files`` whose key group this subtask owns."""

    def state_keys(self, name: str) -> Iterator[Hashable]:
        """Every key that has a value in state ``name`` (restored ones included), for
        operators that keep their own per-key structures (Flink's ``getKeys``)."""
        raise NotImplementedError(
            f"the {type(self).__name__} state backend cannot list the keys of a state"
        )

    def dispose(self) -> None:  # noqa: B027 - optional hook for backends holding resources
        """Release resources (files, memory); called once when the operator closes."""


class StateBackend(ABC):
    """A state backend plugin: makes keyed state backends for operators."""

    name: str = "?"
    ttl_clock: Clock = staticmethod(wall_clock_ms)
    """The clock handed to every keyed backend it makes (set by the task)."""

    @abstractmethod
    def create_keyed_backend(self, key_groups: range, max_parallelism: int) -> KeyedStateBackend:
        """A fresh keyed backend for one operator of one subtask."""
