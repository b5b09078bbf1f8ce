"""State values to Arrow and back: the binary fast path equals pyarrow's own conversion,
and restored entries equal what was snapshotted."""

from __future__ import annotations

import pyarrow as pa
import pytest

from flintlock.core.state.arrow_codec import to_arrow
from flintlock.core.state.state_files import decode, encode, owned_rows


@pytest.mark.parametrize("arrow_type", [pa.binary(), pa.large_binary()])
@pytest.mark.parametrize(
    "values",
    [
        [b"ab", b"", b"\x00\xff" * 40],
        [bytearray(b"xy"), memoryview(b"z"), b"w"],
        [b"a", None, b"c"],  # None: pyarrow's conversion decides (a null)
        [],
    ],
    ids=["bytes", "bytes-like", "with-null", "empty"],
)
def test_binary_values_equal_pyarrow(values: list, arrow_type: pa.DataType) -> None:
    expected = pa.array([bytes(v) if v is not None else None for v in values], arrow_type)
    converted = to_arrow(values, arrow_type, "state 'blob'")
    converted.validate(full=True)
    assert converted.type == arrow_type
    assert converted.equals(expected)


def test_wide_memoryview_keeps_all_its_bytes_as_pyarrow_does() -> None:
    wide = memoryview(pa.array([1, 2], pa.int64()).buffers()[1]).cast("q")  # len 2, 16 bytes
    converted = to_arrow([wide, b"x"], pa.binary(), "state 'blob'")
    assert converted.to_pylist() == [wide.tobytes(), b"x"]
    assert converted.equals(pa.array([wide, b"x"], pa.binary()))


def test_snapshot_rows_decode_to_the_same_entries() -> None:
    keys = [3, 1, 2]
    stored = [b"three", b"one", b"two"]
    batch = encode("blob", "value", keys, stored, None, 128, (pa.binary(), None), None, 0)
    table = pa.Table.from_batches([batch])
    entries = decode("value", owned_rows(table, range(128)))
    assert entries.keys == keys
    assert entries.stored == stored
    assert list(entries) == list(zip(entries.groups, keys, stored, strict=True))


def test_rows_of_other_key_groups_are_left_out() -> None:
    keys = list(range(200))
    batch = encode("n", "value", keys, keys, None, 128, (pa.int64(), None), None, 0)
    table = pa.Table.from_batches([batch])
    groups = table.column("key_group").to_pylist()
    owned = decode("value", owned_rows(table, range(0, 64)))
    assert sorted(owned.keys) == [k for k, g in zip(keys, groups, strict=True) if g < 64]
    assert 0 < len(owned) < len(keys)
