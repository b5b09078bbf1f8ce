"""Vectorised murmur3_32 (seed 0) over Arrow arrays: the key hash used for routing.

Bit-for-bit equal to ``mmh3.hash(key_bytes(key), 0, signed=False)`` (tested), so the
scalar path (keyed state) and the vectorised path (routing) agree on every key's group.
No Python object per record: a few numpy passes per batch.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    rotated: np.ndarray = (x << np.uint32(r)) | (x >> np.uint32(32 - r))
    return rotated


def _mix_block(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    k = _rotl(k * _C1, 15) * _C2
    h = h ^ k
    mixed: np.ndarray = _rotl(h, 13) * np.uint32(5) + np.uint32(0xE6546B64)
    return mixed


def _finalise(h: np.ndarray, length: np.ndarray | int) -> np.ndarray:
    h = h ^ np.asarray(length, dtype=np.uint32)
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h


def murmur3_int64(values: np.ndarray) -> np.ndarray:
    """murmur3_32 of each int64's 8 little-endian bytes."""
    as_u32 = np.ascontiguousarray(values, dtype="<i8").view("<u4").reshape(-1, 2)
    h = np.zeros(len(as_u32), dtype=np.uint32)
    with np.errstate(over="ignore"):
        h = _mix_block(h, as_u32[:, 0].astype(np.uint32))
        h = _mix_block(h, as_u32[:, 1].astype(np.uint32))
        return _finalise(h, 8)


def murmur3_binary(array: pa.Array) -> np.ndarray:
    """murmur3_32 of each value's bytes (string as UTF-8, binary as is)."""
    array = array.cast(pa.large_binary()) if not pa.types.is_large_binary(array.type) else array
    offsets_buffer, data_buffer = array.buffers()[1], array.buffers()[2]
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64)[
        array.offset : array.offset + len(array) + 1
    ]
    data = (
        np.frombuffer(data_buffer, dtype=np.uint8)
        if data_buffer is not None
        else np.zeros(0, np.uint8)
    )
    data = np.concatenate([data, np.zeros(4, np.uint8)])  # so tail reads never overrun
    starts, lengths = offsets[:-1], np.diff(offsets)
    blocks = lengths // 4
    h = np.zeros(len(array), dtype=np.uint32)
    with np.errstate(over="ignore"):
        for j in range(int(blocks.max(initial=0))):
            rows = np.nonzero(blocks > j)[0]
            at = starts[rows] + 4 * j
            k = (
                data[at].astype(np.uint32)
                | (data[at + 1].astype(np.uint32) << np.uint32(8))
                | (data[at + 2].astype(np.uint32) << np.uint32(16))
                | (data[at + 3].astype(np.uint32) << np.uint32(24))
            )
            h[rows] = _mix_block(h[rows], k)
        tail = lengths & 3
        at = starts + 4 * blocks
        k = np.zeros(len(array), dtype=np.uint32)
        for i in (2, 1, 0):
            has = tail > i
            k[has] ^= data[at[has] + i].astype(np.uint32) << np.uint32(8 * i)
        has_tail = tail > 0
        mixed = _rotl(k * _C1, 15) * _C2
        h[has_tail] ^= mixed[has_tail]
        return _finalise(h, lengths.astype(np.uint32))


def murmur3_combine(parts: list[np.ndarray]) -> np.ndarray:
    """murmur3_32 of the little-endian bytes of each row's part hashes, one after the other:
    the hash of a composite key (``key_groups.key_bytes`` of a tuple)."""
    h = np.zeros(len(parts[0]) if parts else 0, dtype=np.uint32)
    with np.errstate(over="ignore"):
        for part in parts:
            h = _mix_block(h, part.astype(np.uint32))
        return _finalise(h, 4 * len(parts))


def hash_keys(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """murmur3_32 of every key of a column: ints as int64, strings as UTF-8, bytes as is;
    a struct column is a composite key (its fields hashed, then combined)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if column.null_count:
        raise ValueError("key column has nulls: every record needs a key")
    kind = column.type
    if pa.types.is_struct(kind):
        return murmur3_combine([hash_keys(part) for part in column.flatten()])
    if pa.types.is_integer(kind):
        return murmur3_int64(column.cast(pa.int64()).to_numpy(zero_copy_only=False))
    if pa.types.is_boolean(kind):
        return murmur3_binary(pc.if_else(column, b"\x01", b"\x00"))
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind):
        return murmur3_binary(column)
    if pa.types.is_large_binary(kind):
        return murmur3_binary(column)
    raise TypeError(f"cannot route by a key of type {kind}: key by int, str, bytes or bool columns")


def is_key_type(kind: pa.DataType) -> bool:
    """True if a column of this type can be a key (hashed stably by ``hash_keys``)."""
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if pa.types.is_struct(kind):
        return all(is_key_type(field.type) for field in kind)
    return bool(
        pa.types.is_integer(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
    )


def key_groups_of(column: pa.Array | pa.ChunkedArray, max_parallelism: int) -> np.ndarray:
    """The key group of every key (same as ``key_groups.key_group_of`` per key)."""
    groups: np.ndarray = (hash_keys(column) % np.uint32(max_parallelism)).astype(np.int32)
    return groups
