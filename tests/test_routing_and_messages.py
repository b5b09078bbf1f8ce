"""Routing (key groups, partitioners), chaining, and the receiver's channel checks."""

from __future__ import annotations

import random

import mmh3
import pyarrow as pa
import pytest

from flintlock.core.errors import ChannelError
from flintlock.core.events import CheckpointBarrier, DataEvent, EndOfInputEvent, WatermarkEvent
from flintlock.core.exchange.key_groups import key_bytes, key_group_of
from flintlock.core.exchange.messages import Kind, encode_batch
from flintlock.core.exchange.murmur import hash_keys, key_groups_of
from flintlock.core.exchange.partitioners import FORWARD, BatchSplitter, hash_by
from flintlock.core.exchange.reader import MessageReader
from flintlock.core.exchange.writer import MessageWriter
from flintlock.core.plan.execution import ExecutionPlan
from flintlock.core.plan.graph import InputEdge, Transformation, build_job_graph
from flintlock.core.sources.source import SourceOperator
from flintlock.errors import GraphError


def test_vectorised_murmur_equals_the_scalar_hash() -> None:
    rng = random.Random(7)
    ints = [rng.randint(-(2**63), 2**63 - 1) for _ in range(500)] + [0, -1, 1]
    strs = ["".join(rng.choice("ab€😀z") for _ in range(rng.randint(0, 13))) for _ in range(500)]
    for keys in (ints, strs):
        hashed = hash_keys(pa.array(keys)).tolist()
        assert hashed == [mmh3.hash(key_bytes(k), 0, signed=False) for k in keys]
        assert key_groups_of(pa.array(keys), 128).tolist() == [key_group_of(k) for k in keys]
    sliced = pa.array(strs).slice(3, 50)
    assert key_groups_of(sliced, 128).tolist() == [key_group_of(k) for k in strs[3:53]]


def test_fixed_key_groups_never_change_across_versions() -> None:
    # pinned values: routing must stay stable across processes, machines and releases
    assert [key_group_of(k) for k in (0, 1, 42, "a", "user-1")] == [
        mmh3.hash(key_bytes(k), 0, signed=False) % 128 for k in (0, 1, 42, "a", "user-1")
    ]
    assert key_group_of(42) == key_group_of(42) and key_group_of("a") != key_group_of("b")


def test_hash_split_keeps_order_within_each_target() -> None:
    batch = pa.record_batch({"k": [f"k{i % 9}" for i in range(100)], "i": list(range(100))})
    splitter = BatchSplitter(hash_by("k"), 0, 3, 128)
    parts = dict(splitter.split(batch))
    assert sum(p.num_rows for p in parts.values()) == 100
    for target, part in parts.items():
        assert part.column("i").to_pylist() == sorted(part.column("i").to_pylist())
        assert {key_group_of(k) * 3 // 128 for k in part.column("k").to_pylist()} == {target}


def _transformation(tid: int, parallelism: int, inputs: list[InputEdge]) -> Transformation:
    return Transformation(tid, f"t{tid}", lambda: None, parallelism, inputs, is_source=not inputs)  # type: ignore[arg-type,return-value]


def test_forward_edges_of_equal_parallelism_chain_and_others_do_not() -> None:
    graph = build_job_graph(
        [
            _transformation(0, 2, []),
            _transformation(1, 2, [InputEdge(0, 1)]),  # forward: chained
            _transformation(2, 3, [InputEdge(1, 1)]),  # other parallelism: rebalance
            _transformation(3, 3, [InputEdge(2, 1, hash_by("k"))]),  # keyed: new task
        ]
    )
    assert [v.name for v in graph.vertices.values()] == ["t0 -> t1", "t2", "t3"]
    assert [v.layer for v in graph.vertices.values()] == [0, 1, 2]
    assert str(graph.vertices[1].inputs[0][2]) == "rebalance"
    with pytest.raises(GraphError, match="needs equal parallelism"):
        build_job_graph(
            [_transformation(0, 2, []), _transformation(1, 3, [InputEdge(0, 1, FORWARD)])]
        )


def two_vertex_plan() -> ExecutionPlan:
    graph = build_job_graph(
        [
            Transformation(0, "src", lambda: SourceOperator(None), 2, is_source=True),  # type: ignore[arg-type]
            Transformation(1, "sink", lambda: None, 2, [InputEdge(0, 1, hash_by("k"))]),  # type: ignore[arg-type,return-value]
        ]
    )
    return ExecutionPlan(
        "job", "run", 1, CheckpointBarrier(1, final=True), "/tmp", 128, "hashmap", graph
    )


def read(plan: ExecutionPlan, rows: list[tuple]) -> list[object]:  # type: ignore[type-arg]
    vertex = plan.vertices[1]
    writer = MessageWriter(plan, vertex, 0)
    columns = list(zip(*rows, strict=True))
    from flintlock.core.exchange.messages import MESSAGE_SCHEMA

    batch = pa.RecordBatch.from_arrays(
        [pa.array(list(c), f.type) for c, f in zip(columns, MESSAGE_SCHEMA, strict=True)],
        schema=MESSAGE_SCHEMA,
    )
    return list(MessageReader(plan, vertex, 0, iter([batch]), writer).events())


def message(
    seq: int, kind: Kind, src: int = 0, dest_subtask: int = 0, value: int = 0, payload: bytes = b""
) -> tuple:  # type: ignore[type-arg]
    return (0, 1, dest_subtask, 0, src, 1, seq, int(kind), value, payload)


def test_reader_turns_messages_into_events_per_channel() -> None:
    data = encode_batch(pa.record_batch({"k": ["a"]}))
    events = read(
        two_vertex_plan(),
        [
            message(0, Kind.DATA, payload=data),
            message(0, Kind.WATERMARK, src=1, value=5),
            message(1, Kind.END_OF_INPUT),
            message(2, Kind.BARRIER, value=1, payload=b'{"kind": "checkpoint", "final": true}'),
        ],
    )
    assert [type(e) for e in events] == [
        DataEvent,
        WatermarkEvent,
        EndOfInputEvent,
        CheckpointBarrier,
    ]
    assert events[1].channel == 1 and events[1].watermark.timestamp == 5  # type: ignore[attr-defined]
    assert events[3].final and events[3].checkpoint_id == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("rows", "error"),
    [
        ([message(0, Kind.END_OF_INPUT), message(2, Kind.END_OF_INPUT)], "gap on the channel"),
        (
            [message(0, Kind.END_OF_INPUT), message(0, Kind.END_OF_INPUT)],
            "duplicate on the channel",
        ),
        ([message(0, Kind.END_OF_INPUT, dest_subtask=1)], "received a message for subtask 1"),
    ],
)
def test_reader_fails_on_a_gap_a_duplicate_or_a_foreign_message(rows: list, error: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ChannelError, match=error):
        read(two_vertex_plan(), rows)


def test_large_data_payloads_travel_compressed_and_decode_equal() -> None:
    """From COMPRESS_FROM_BYTES a DATA payload is LZ4-compressed Arrow IPC (any IPC
    reader undoes it); smaller ones go as they are."""
    import numpy as np

    from flintlock.core.exchange.messages import COMPRESS_FROM_BYTES, decode_batch

    big = pa.record_batch({"k": np.arange(100_000) % 7, "v": np.zeros(100_000)})
    small = pa.record_batch({"k": [1, 2, 3]})
    assert big.nbytes >= COMPRESS_FROM_BYTES > small.nbytes

    def plain(batch: pa.RecordBatch) -> bytes:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        return sink.getvalue().to_pybytes()

    payload = encode_batch(big)
    assert len(payload) < len(plain(big)) / 4  # repetitive columns: far smaller
    assert decode_batch(pa.py_buffer(payload)).equals(big)
    assert decode_batch(payload).equals(big)
    assert encode_batch(small) == plain(small)  # as it is
    assert decode_batch(encode_batch(small)).equals(small)
