"""Keyed functions using every state type, and their plain-Python references (shared by the
harness and Spark state tests and by bench/w2.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from flintlock import (
    AggregateFunction,
    AggregatingStateDescriptor,
    KeyedBatchProcessFunction,
    KeyedProcessFunction,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)


class Average(AggregateFunction):
    """Mean of the inputs; the accumulator is [sum, count]."""

    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def add(self, value: int, accumulator: list[int]) -> list[int]:
        return [accumulator[0] + value, accumulator[1] + 1]

    def get_result(self, accumulator: list[int]) -> float:
        return accumulator[0] / accumulator[1]

    def merge(self, a: list[int], b: list[int]) -> list[int]:
        return [a[0] + b[0], a[1] + b[1]]


def add(a: int, b: int) -> int:
    return a + b


ALL_STATES_SCHEMA = pa.schema(
    [
        ("k", pa.string()),
        ("count", pa.int64()),
        ("last3", pa.list_(pa.int64())),
        ("tag_count", pa.int64()),
        ("tags", pa.int64()),
        ("total", pa.int64()),
        ("mean", pa.float64()),
    ]
)


class AllStates(KeyedProcessFunction):
    """Every keyed state type at once: per record, emits what each one holds."""

    output_schema = ALL_STATES_SCHEMA

    def open(self) -> None:
        ctx = self.runtime_context
        self.count = ctx.get_state(ValueStateDescriptor("count", pa.int64(), default=0))
        self.history = ctx.get_list_state(ListStateDescriptor("history", pa.int64()))
        self.tags = ctx.get_map_state(MapStateDescriptor("tags", pa.string(), pa.int64()))
        self.total = ctx.get_reducing_state(ReducingStateDescriptor("total", add, pa.int64()))
        self.mean = ctx.get_aggregating_state(
            AggregatingStateDescriptor("mean", Average(), pa.list_(pa.int64()))
        )

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        v, tag = value["v"], value["tag"]
        self.count.update(self.count.value() + 1)
        self.history.add(v)
        if len(self.history.get()) > 3:
            self.history.update(self.history.get()[-3:])
        self.tags.put(tag, (self.tags.get(tag) or 0) + 1)
        self.total.add(v)
        self.mean.add(v)
        out.collect(
            {
                "k": ctx.get_current_key(),
                "count": self.count.value(),
                "last3": self.history.get(),
                "tag_count": self.tags.get(tag),
                "tags": len(list(self.tags.keys())),
                "total": self.total.get(),
                "mean": self.mean.get(),
            }
        )


def all_states_reference(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What AllStates emits, per record, in plain Python."""
    seen: dict[str, list[dict[str, Any]]] = {}
    out = []
    for record in records:
        mine = seen.setdefault(record["k"], [])
        mine.append(record)
        values = [r["v"] for r in mine]
        tags = [r["tag"] for r in mine]
        out.append(
            {
                "k": record["k"],
                "count": len(mine),
                "last3": values[-3:],
                "tag_count": tags.count(record["tag"]),
                "tags": len(set(tags)),
                "total": sum(values),
                "mean": sum(values) / len(values),
            }
        )
    return out


def records(n: int, keys: int = 7) -> list[dict[str, Any]]:
    """Test input: keys, values and tags in a fixed, well-mixed order."""
    return [
        {"i": i, "k": f"key-{(i * 7919) % keys}", "v": (i * 31) % 17, "tag": f"t{i % 3}"}
        for i in range(n)
    ]


RUNNING_SUM_SCHEMA = pa.schema([("i", pa.int64()), ("k", pa.int64()), ("total", pa.int64())])


class RunningSum(KeyedProcessFunction):
    """W2 per record: a running sum of ``v`` per key in ValueState, one output per record."""

    output_schema = RUNNING_SUM_SCHEMA

    def open(self) -> None:
        descriptor = ValueStateDescriptor("total", pa.int64(), default=0)
        self.total = self.runtime_context.get_state(descriptor)

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        total = self.total.value() + value["v"]
        self.total.update(total)
        out.collect({"i": value["i"], "k": value["k"], "total": total})


class BatchRunningSum(KeyedBatchProcessFunction):
    """W2 per batch: the same running sums, reading and updating every key's state at once."""

    output_schema = RUNNING_SUM_SCHEMA

    def open(self) -> None:
        descriptor = ValueStateDescriptor("total", pa.int64(), default=0)
        self.total = self.runtime_context.get_state(descriptor)

    def process_batch(self, batch: pa.RecordBatch, keys: pa.Array, ctx: Any) -> pa.RecordBatch:
        encoded = keys.dictionary_encode()
        codes = encoded.indices.to_numpy()
        unique = encoded.dictionary
        start = self.total.values(unique).to_numpy().astype(np.int64)
        values = batch.column("v").to_numpy().astype(np.int64)
        running = running_sums(codes, values) + start[codes]
        totals = start.copy()
        np.add.at(totals, codes, values)
        self.total.update_values(unique, pa.array(totals))
        return pa.RecordBatch.from_arrays(
            [batch.column("i"), batch.column("k"), pa.array(running)], schema=RUNNING_SUM_SCHEMA
        )


def running_sums(codes: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per row, the sum of ``values`` of the rows of its group up to and including it."""
    order = np.argsort(codes, kind="stable")
    ordered = values[order]
    cumulative = np.cumsum(ordered)
    groups = codes[order]
    first = np.empty(len(groups), dtype=bool)
    first[:1] = True
    first[1:] = groups[1:] != groups[:-1]
    before = (cumulative - ordered)[first]
    result = np.empty_like(cumulative)
    result[order] = cumulative - before[np.cumsum(first) - 1]
    return result
