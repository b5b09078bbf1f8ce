"""The exchange's framing: coalesced data messages, one-copy payloads read in place, and
routing that stays exactly the key-group assignment (no Spark)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from flintlock.core.events import CheckpointBarrier, DataEvent, EndOfInputEvent
from flintlock.core.exchange.key_groups import key_group_of
from flintlock.core.exchange.messages import Kind, MessageBuffer, decode_batch, payload_buffers
from flintlock.core.exchange.partitioners import (
    REBALANCE,
    BatchSplitter,
    Partitioner,
    _order_by_target,
    hash_by,
)
from flintlock.core.exchange.reader import MessageReader
from flintlock.core.exchange.writer import COALESCE_ROWS, MessageWriter
from flintlock.core.plan.execution import ExecutionPlan
from flintlock.core.plan.graph import InputEdge, Transformation, build_job_graph
from flintlock.core.sources.source import SourceOperator


def keyed_plan(parallelism: int = 2, partitioner: Partitioner | None = None) -> ExecutionPlan:
    """A source of 1 subtask feeding ``parallelism`` subtasks by key group of ``k``."""
    edge = InputEdge(0, 1, partitioner or hash_by("k"))
    graph = build_job_graph(
        [
            Transformation(0, "src", lambda: SourceOperator(None), 1, is_source=True),  # type: ignore[arg-type]
            Transformation(1, "sink", lambda: None, parallelism, [edge]),  # type: ignore[arg-type,return-value]
        ]
    )
    return ExecutionPlan(
        "job", "run", 1, CheckpointBarrier(1, final=True), "/tmp", 128, "hashmap", graph
    )


def batches(count: int, rows: int, start: int = 0) -> list[pa.RecordBatch]:
    """``count`` batches of (k, i): i numbers rows across batches from ``start``."""
    out = []
    for b in range(count):
        i = np.arange(start + b * rows, start + (b + 1) * rows, dtype=np.int64)
        out.append(pa.record_batch({"k": (i * 7919) % 1000, "i": i}))
    return out


def events_of(plan: ExecutionPlan, messages: pa.RecordBatch, subtask: int) -> list[object]:
    """What ``subtask`` reads of ``messages`` (Spark routes it only its own)."""
    vertex = plan.vertices[1]
    writer = MessageWriter(plan, vertex, subtask)
    messages = messages.filter(pc.equal(messages.column("dest_subtask"), subtask))
    return list(MessageReader(plan, vertex, subtask, iter([messages]), writer).events())


def test_small_batches_are_framed_together_and_every_row_reaches_its_key_group() -> None:
    plan = keyed_plan()
    writer = MessageWriter(plan, plan.vertices[0], 0)
    sent = batches(20, 10_000)  # Spark's 10,000-row batches: 200,000 rows
    for batch in sent:
        writer.emit_batch(batch)
    assert len(writer.buffer) == 2 * 2  # 70,000 rows framed twice (>= COALESCE_ROWS)
    writer.end_of_input()  # frames the last 60,000 rows first
    messages = writer.buffer.take()
    kinds = messages.column("kind").to_pylist()
    assert kinds == [Kind.DATA] * 6 + [Kind.END_OF_INPUT] * 2
    received = 0
    for subtask in (0, 1):
        events = events_of(plan, messages, subtask)
        assert [type(e) for e in events] == [DataEvent] * 3 + [EndOfInputEvent]
        rows = pa.Table.from_batches([e.batch for e in events[:-1]])  # type: ignore[attr-defined]
        i = rows.column("i").to_pylist()
        assert i == sorted(i)  # the order of the rows for one target is kept
        assert {key_group_of(k) * 2 // 128 for k in rows.column("k").to_pylist()} == {subtask}
        received += rows.num_rows
    assert received == 200_000 and 7 * 10_000 >= COALESCE_ROWS > 6 * 10_000


def test_control_events_and_schema_changes_frame_pending_data_first() -> None:
    plan = keyed_plan(parallelism=1)
    writer = MessageWriter(plan, plan.vertices[0], 0)
    writer.emit_batch(pa.record_batch({"k": [1, 2], "i": [0, 1]}))
    writer.emit_batch(pa.record_batch({"k": ["x"], "i": [2]}))  # another schema
    writer.emit_batch(pa.record_batch({"k": ["y"], "i": [3]}))
    writer._to_all(Kind.BARRIER, 1, json.dumps({"kind": "checkpoint", "final": True}).encode())
    messages = writer.buffer.take()
    assert messages.column("kind").to_pylist() == [Kind.DATA, Kind.DATA, Kind.BARRIER]
    assert messages.column("seq").to_pylist() == [0, 1, 2]
    events = events_of(plan, messages, 0)
    assert [e.batch.column("i").to_pylist() for e in events[:2]] == [[0, 1], [2, 3]]  # type: ignore[attr-defined]
    assert isinstance(events[2], CheckpointBarrier) and events[2].final


def test_payloads_are_one_buffer_aligned_and_read_in_place() -> None:
    buffer = MessageBuffer()
    data = pa.record_batch({"v": np.arange(1000, dtype=np.int64)})
    buffer.add((0, 1, 0, 0, 0, 1, 0, int(Kind.BARRIER), 1, b'{"kind": "x"}'))  # 13 bytes
    buffer.add_batch((0, 1, 0, 0, 0, 1, 1, int(Kind.DATA), 0), data)
    messages = buffer.take()
    column = messages.column("payload")
    assert len(column[0].as_py()) == 16  # padded with spaces to 8 bytes
    views = payload_buffers(column)
    assert json.loads(views[0].to_pybytes()) == {"kind": "x"}
    assert all(v.address % 8 == 0 for v in views)
    decoded = decode_batch(views[1])
    assert decoded.equals(data)
    start = column.buffers()[2].address
    assert start <= decoded.column(0).buffers()[1].address < start + column.buffers()[2].size


@pytest.mark.parametrize("parallelism", [1, 2, 5, 8, 9, 16, 128])
def test_grouping_by_target_equals_a_stable_sort(parallelism: int) -> None:
    targets = np.random.default_rng(parallelism).integers(0, parallelism, 5000)
    order, counts = _order_by_target(targets, parallelism)
    assert order.tolist() == np.argsort(targets, kind="stable").tolist()
    assert list(counts) == np.bincount(targets, minlength=parallelism).tolist()


def test_a_batch_for_one_target_is_sent_as_it_is() -> None:
    keys = [k for k in range(200) if key_group_of(k) * 2 // 128 == 1][:50]
    batch = pa.record_batch({"k": keys})
    parts = list(BatchSplitter(hash_by("k"), 0, 2, 128).split(batch))
    assert len(parts) == 1 and parts[0][0] == 1 and parts[0][1] is batch


def test_a_rebalance_still_sends_each_batch_to_the_next_subtask() -> None:
    plan = keyed_plan(parallelism=2, partitioner=REBALANCE)
    writer = MessageWriter(plan, plan.vertices[0], 0)
    for batch in batches(4, 100):  # gathered, all 400 rows would go to one subtask
        writer.emit_batch(batch)
    messages = writer.buffer.take()
    assert messages.column("dest_subtask").to_pylist() == [0, 1, 0, 1]
