"""Restored state against a changed descriptor: a struct that gained a nullable field
restores (old values have it null); any other change is refused naming state and column."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from flintlock import LifecycleError, OneInputStreamOperator, ValueStateDescriptor
from flintlock.core.checkpoint.snapshots import TaskSnapshot
from flintlock.errors import StateSchemaError
from flintlock.testing import OneInputHarness

OLD = pa.struct([("count", pa.int64())])


class Profile(OneInputStreamOperator):
    """Keeps a struct per key; a row with ``note`` sets it (when the type has the field)."""

    key_column = "k"

    def __init__(self, value_type: pa.DataType) -> None:
        super().__init__("profile")
        self.value_type = value_type

    def initialize_state(self) -> None:
        descriptor = ValueStateDescriptor("profile", self.value_type)
        self.profile = self.context.keyed_state(descriptor)

    def process_batch(self, batch: pa.RecordBatch) -> None:
        for row in batch.to_pylist():
            self.set_current_key(row["k"])
            value = self.profile.value() or {"count": 0}
            value = {**value, "count": value["count"] + 1}
            if "note" in row:
                value["note"] = row["note"]
            self.profile.update(value)


def first_epoch() -> TaskSnapshot:
    harness = OneInputHarness(Profile(OLD))
    harness.process_records([{"k": "ada"}, {"k": "bob"}, {"k": "ada"}])
    return harness.checkpoint(1)


def stored_rows(snapshot: TaskSnapshot) -> dict[str, Any]:
    path = snapshot.operators["profile"].keyed[0].path
    table = pa.ipc.open_file(path).read_all()
    return dict(
        zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True)
    )


def test_a_struct_that_gained_a_nullable_field_restores() -> None:
    new = pa.struct([("count", pa.int64()), ("note", pa.string())])
    harness = OneInputHarness(Profile(new), restore_from=first_epoch())
    harness.process_records([{"k": "bob", "note": "hi"}])
    snapshot = harness.checkpoint(2)
    assert stored_rows(snapshot) == {
        "ada": {"count": 2, "note": None},  # restored, not written again: the new field null
        "bob": {"count": 2, "note": "hi"},
    }


@pytest.mark.parametrize(
    ("declared", "problem"),
    [
        (
            pa.struct([("count", pa.string())]),
            "column 'value.count' was int64, it is declared string now",
        ),
        (pa.struct([("total", pa.int64())]), "column 'value.count' was removed (or renamed)"),
        (
            pa.struct([("count", pa.int64()), pa.field("note", pa.string(), nullable=False)]),
            "column 'value.note' was added but is not nullable",
        ),
        (pa.int64(), "column 'value' was struct<count: int64>, it is declared int64 now"),
    ],
)
def test_an_incompatible_change_is_refused_naming_state_and_column(
    declared: pa.DataType, problem: str
) -> None:
    harness = OneInputHarness(Profile(declared), restore_from=first_epoch())
    with pytest.raises(LifecycleError) as failure:
        harness.open()
    cause = failure.value.__cause__
    assert isinstance(cause, StateSchemaError)
    assert str(cause).startswith(
        f"operator 'profile': restored state 'profile' cannot be read as declared: {problem};"
    )
    assert failure.value.phase == "initialize_state"
