"""Key -> key group -> subtask, as in Flink, over a stable murmur hash of the key's bytes.

Never Python's ``hash()``: it is salted per process, so two workers would disagree.
Integers hash as little-endian int64, strings as UTF-8, bytes as themselves; a tuple (a
composite key, from ``key_by([...])``) as the murmur hash of its parts' hashes, in order.
"""

from __future__ import annotations

import mmh3

DEFAULT_MAX_PARALLELISM = 128


def key_bytes(key: object) -> bytes:
    """The normalised bytes of a key: int -> int64 LE, str -> UTF-8, bytes as is, a tuple
    -> the 4-byte little-endian murmur hashes of its parts (``murmur.murmur3_combine``)."""
    if isinstance(key, tuple):
        return b"".join(
            mmh3.hash(key_bytes(part), 0, signed=False).to_bytes(4, "little") for part in key
        )
    if isinstance(key, bool):
        return b"\x01" if key else b"\x00"
    if isinstance(key, int):
        return key.to_bytes(8, "little", signed=True)
    if isinstance(key, str):
        return key.encode("utf-8")
    if isinstance(key, bytes | bytearray):
        return bytes(key)
    raise TypeError(
        f"key {key!r} of type {type(key).__name__} cannot be hashed stably; "
        f"key by int, str, bytes or bool values (or a tuple of them)"
    )


def key_group_of(key: object, max_parallelism: int = DEFAULT_MAX_PARALLELISM) -> int:
    """The key group of ``key``: murmur3_32 (seed 0, unsigned) of its bytes mod max parallelism."""
    return mmh3.hash(key_bytes(key), 0, signed=False) % max_parallelism


def subtask_for_key_group(key_group: int, parallelism: int, max_parallelism: int) -> int:
    """The subtask that owns ``key_group``: contiguous ranges, Flink's formula."""
    return key_group * parallelism // max_parallelism


def key_group_range(subtask: int, parallelism: int, max_parallelism: int) -> range:
    """The key groups owned by ``subtask`` (Flink's KeyGroupRangeAssignment)."""
    start = (subtask * max_parallelism + parallelism - 1) // parallelism
    end = ((subtask + 1) * max_parallelism + parallelism - 1) // parallelism
    return range(start, end)
