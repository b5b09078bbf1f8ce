"""Restore with another parallelism, in the harness: keyed state moves with its key groups,
operator list state is split evenly, union state reaches every subtask; results equal an
uninterrupted run computed in plain Python."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from flintlock import (
    CheckpointError,
    ListStateDescriptor,
    OneInputStreamOperator,
    ValueStateDescriptor,
)
from flintlock.core.checkpoint.snapshots import StateFile, TaskSnapshot
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.exchange.key_groups import key_group_of, subtask_for_key_group
from flintlock.core.state.operator_state import OperatorStateStore
from flintlock.testing import OneInputHarness, rescale

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64())])


class Tally(OneInputStreamOperator):
    """A running sum per key (keyed state), every value seen (split operator state), and
    a note of every subtask that ran (union operator state)."""

    key_column = "k"

    def __init__(self) -> None:
        super().__init__("tally")

    def initialize_state(self) -> None:
        state = self.context.operator_state
        self.sums = self.context.keyed_state(ValueStateDescriptor("sum", pa.int64(), default=0))
        self.seen = state.get_list_state(ListStateDescriptor("seen", pa.int64()))
        self.runs = state.get_union_list_state(ListStateDescriptor("runs", pa.string()))
        task = self.context.task
        self.runs.add(f"{task.epoch}:{task.subtask_index}/{task.parallelism}")

    def process_batch(self, batch: pa.RecordBatch) -> None:
        totals = []
        keys, values = batch.column("k").to_pylist(), batch.column("v").to_pylist()
        for k, v in zip(keys, values, strict=True):
            self.set_current_key(k)
            self.sums.update(self.sums.value() + v)
            self.seen.add(v)
            totals.append(self.sums.value())
        self.output.emit(batch.append_column("total", pa.array(totals, pa.int64())))


def run_phase(
    rows: list[dict[str, Any]], parallelism: int, old: list[TaskSnapshot] | None, checkpoint: int
) -> tuple[list[TaskSnapshot], list[dict[str, Any]], tuple[list[list[int]], list[list[str]]]]:
    """One epoch at ``parallelism``: each row goes to the subtask owning its key group."""
    operators = [Tally() for _ in range(parallelism)]
    harnesses = [
        OneInputHarness(
            operators[s],
            parallelism=parallelism,
            subtask_index=s,
            restore_from=rescale(old, s, parallelism) if old else None,
            epoch=checkpoint,
        )
        for s in range(parallelism)
    ]
    for subtask, harness in enumerate(harnesses):
        mine = [
            r
            for r in rows
            if subtask_for_key_group(key_group_of(r["k"]), parallelism, 128) == subtask
        ]
        harness.open()
        if mine:
            harness.process_records(mine, schema=SCHEMA)
    seen = [op.seen.get() for op in operators]
    runs = [sorted(op.runs.get()) for op in operators]
    snapshots = [h.checkpoint(checkpoint) for h in harnesses]
    output = [row for h in harnesses for row in h.output_rows()]
    return snapshots, output, (seen, runs)


def owner(key: int, parallelism: int) -> int:
    return subtask_for_key_group(key_group_of(key), parallelism, 128)


def running_sums(rows: list[dict[str, Any]]) -> list[tuple[int, int, int]]:
    totals: dict[int, int] = {}
    out = []
    for row in rows:
        totals[row["k"]] = totals.get(row["k"], 0) + row["v"]
        out.append((row["k"], row["v"], totals[row["k"]]))
    return sorted(out)


@pytest.mark.parametrize("parallelisms", [(2, 3, 1), (3, 1, 2)])
def test_rescaled_restores_equal_an_uninterrupted_run(parallelisms: tuple[int, int, int]) -> None:
    rows = [{"k": i * 7 % 23, "v": i} for i in range(600)]
    thirds = [rows[:200], rows[200:400], rows[400:]]
    snapshots, output, states = None, [], []
    for epoch, (part, parallelism) in enumerate(zip(thirds, parallelisms, strict=True), 1):
        snapshots, out, state = run_phase(part, parallelism, snapshots, epoch)
        output += out
        states.append(state)
    assert sorted((r["k"], r["v"], r["total"]) for r in output) == running_sums(rows)
    # split state: every value seen so far, each exactly once, spread evenly
    for epoch, (seen, _) in enumerate(states, 1):
        everything = [v for values in seen for v in values]
        assert Counter(everything) == Counter(r["v"] for r in rows[: 200 * epoch])
    last_seen = states[-1][0]
    restored_sizes = [len(values) for values in last_seen]
    assert sum(restored_sizes) == 600
    # union state: each subtask of the last epoch has every earlier subtask's note, and its own
    runs = states[-1][1]
    p1, p2, p3 = parallelisms
    earlier = [f"1:{s}/{p1}" for s in range(p1)] + [f"2:{s}/{p2}" for s in range(p2)]
    for subtask, notes in enumerate(runs):
        assert sorted(set(notes)) == sorted([*earlier, f"3:{subtask}/{p3}"]), subtask


def test_even_split_of_operator_state_after_rescale() -> None:
    rows = [{"k": i % 5, "v": i} for i in range(10)]
    snapshots, _, _ = run_phase(rows, 2, None, 1)
    _, _, (seen, _) = run_phase([], 3, snapshots, 2)
    # the old lists, in old subtask order, cut into 3 contiguous pieces of 4, 3, 3
    assert [len(values) for values in seen] == [4, 3, 3]
    assert sorted(v for values in seen for v in values) == list(range(10))


def test_keyed_state_goes_only_to_the_owner_of_its_key_group() -> None:
    rows = [{"k": k, "v": 1} for k in range(40)]
    snapshots, _, _ = run_phase(rows, 1, None, 1)
    for subtask in range(3):
        restore = rescale(snapshots, subtask, 3)
        # the one old subtask overlaps every new one: its files are offered, rows filtered
        assert [s.subtask_index for s in restore.snapshots] == [0]
    wide, _, _ = run_phase(rows, 4, None, 1)
    restore = rescale(wide, 0, 2)  # new subtask 0 of 2 owns old subtasks 0 and 1's groups
    owners = {s.subtask_index: bool(s.operators["tally"].keyed) for s in restore.snapshots}
    assert owners == {0: True, 1: True, 2: False, 3: False}


class Alarm(OneInputStreamOperator):
    """Registers an event-time timer at ``v`` for each row; emits (k, timestamp) when one fires."""

    key_column = "k"

    def __init__(self) -> None:
        super().__init__("alarm")

    def process_batch(self, batch: pa.RecordBatch) -> None:
        keys, values = batch.column("k").to_pylist(), batch.column("v").to_pylist()
        for k, v in zip(keys, values, strict=True):
            self.set_current_key(k)
            self.timer_service().register_event_time_timer(v)

    def on_event_time(self, timestamp: int, key: Any) -> None:
        self.output.emit(pa.record_batch({"k": [key], "ts": [timestamp]}))


@pytest.mark.parametrize(("before", "after"), [(2, 3), (3, 1)])
def test_timers_move_with_their_key_groups_and_fire_once(before: int, after: int) -> None:
    rows = [{"k": i % 17, "v": 1000 - i} for i in range(200)]
    snapshots = []
    for subtask in range(before):
        harness = OneInputHarness(Alarm(), parallelism=before, subtask_index=subtask)
        harness.process_records([r for r in rows if owner(r["k"], before) == subtask])
        harness.process_watermark(799)  # fires the timers at or below 799, before the snapshot
        snapshots.append(harness.checkpoint(1))
    fired_before = [(r["k"], r["v"]) for r in rows if r["v"] <= 799]
    fired = []
    for subtask in range(after):
        harness = OneInputHarness(
            Alarm(),
            parallelism=after,
            subtask_index=subtask,
            restore_from=rescale(snapshots, subtask, after),
        )
        harness.process_watermark(10_000)
        out = harness.output_rows()
        assert [r["ts"] for r in out] == sorted(r["ts"] for r in out)  # timestamp order
        assert all(owner(r["k"], after) == subtask for r in out)  # fired where the key lives
        fired += [(r["k"], r["ts"]) for r in out]
        harness.complete(2)
    assert sorted(fired) == sorted({(r["k"], r["v"]) for r in rows} - set(fired_before))


def test_at_the_same_parallelism_a_subtask_reads_only_its_own_split_state(
    tmp_path: Path,
) -> None:
    """Split list state at an unchanged parallelism stays with its subtask, so the other
    subtasks' files are never read (a request each on an object store); union state needs
    them all, and reads them."""
    storage = CheckpointStorage.from_uri(str(tmp_path))
    own = f"{storage.base_path}/0/operator-seen.arrow"
    storage.write_table(own, pa.table({"value": [1, 2]}))
    gone = f"{storage.base_path}/1/operator-seen.arrow"  # never written: reading it fails

    def restored(mode: str) -> OperatorStateStore:
        store = OperatorStateStore(subtask_index=0, parallelism=2)
        store.restore(
            storage,
            [
                (0, 2, [StateFile("seen", "list", own, mode)]),
                (1, 2, [StateFile("seen", "list", gone, mode)]),
            ],
        )
        return store

    seen = ListStateDescriptor("seen", pa.int64())
    assert list(restored("split").get_list_state(seen).get()) == [1, 2]
    with pytest.raises(CheckpointError, match=f"{gone} is missing"):
        restored("union").get_union_list_state(seen)
