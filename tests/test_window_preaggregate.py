"""Two-phase window aggregation (a pre-aggregation before the keyed exchange) gives the
one-phase plan's output exactly: same rows in the same order per firing, same late
count, with two upstream channels whose watermarks differ, gathered batches, sliding
and tumbling windows, composite keys, and checkpoints restored across the two plans."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from flintlock import (
    OutputTag,
    SlidingEventTimeWindows,
    StreamExecutionEnvironment,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from flintlock.core.api.keys import ColumnKey, ColumnsKey, KeySelector
from flintlock.core.plan.graph import build_job_graph
from flintlock.operators.window_batch import BatchWindowAggregateOperator
from flintlock.operators.window_preaggregate import WindowPreAggregateOperator
from flintlock.testing import OneInputHarness

AGGREGATES = {
    "n": ("v", "count"),
    "total": ("v", "sum"),
    "low": ("w", "min"),
    "high": ("w", "max"),
    "mean": ("w", "mean"),
    "avg_v": ("v", "mean"),
}
Event = tuple[int, str, Any]  # (channel, "rows" | "watermark", table or timestamp)


def channel_events(channel: int, n: int, lag: int, seed: int) -> list[Event]:
    """Out-of-order rows in 50-row batches, each followed by the channel's watermark
    (its max timestamp minus ``lag``); every 23rd row is ~1.5 s older than its peers;
    every 11th has no ``w`` (a float: quarters, so that their sums are exact)."""
    i = np.arange(n, dtype=np.int64)
    ts = i * 4 - ((i * 7919 + seed) % 300) + channel * 37
    ts[i % 23 == 5] -= 1500
    table = pa.table(
        {
            "k": (i * 13 + seed) % 37,
            "g": ((i // 3) % 2).astype(np.int64),
            "ts": ts,
            "v": (i * 31 + seed) % 97,
            "w": pa.array(((i * 17) % 41) * 0.25, mask=i % 11 == 4),  # quarters, some null
        }
    )
    events: list[Event] = []
    for offset in range(0, n, 50):
        part = table.slice(offset, 50)
        events.append((channel, "rows", part))
        events.append((channel, "watermark", int(np.max(part.column("ts"))) - lag))
    return events


def interleaved() -> list[Event]:
    """Channel 0 (watermark close behind its rows) and channel 1 (far behind), merged in
    uneven runs, so rows late by channel 0's own watermark are on time downstream."""
    first, second = channel_events(0, 1200, 40, 3), channel_events(1, 900, 400, 11)
    events, runs = [], [3, 1, 5, 2, 1, 4]
    step = 0
    while first or second:
        for source in (first, second):
            take = runs[step % len(runs)]
            step += 1
            events += source[:take]
            del source[:take]
    return events


def gathered(events: list[Event]) -> list[Event]:
    """As the exchange writer does: consecutive row batches of a channel sent as one."""
    out: list[Event] = []
    for event in events:
        last = out[-1] if out else None
        if last and event[1] == "rows" and last[1] == "rows" and last[0] == event[0]:
            out[-1] = (event[0], "rows", pa.concat_tables([last[2], event[2]]))
        else:
            out.append(event)
    return out


def downstream(assigner: Any, key: KeySelector, pre: bool, **kwargs: Any) -> OneInputHarness:
    op = BatchWindowAggregateOperator(
        assigner, AGGREGATES, key, "ts", name="agg", pre_aggregated=pre
    )
    return OneInputHarness(op, input_channels={1: 2}, **kwargs)


class Plan:
    """One plan's downstream window subtask, fed through a pre-aggregation per channel
    (two-phase) or with the rows themselves (one-phase)."""

    def __init__(
        self, assigner: Any, key: KeySelector, pre: bool, poor_reduction: float = 2.0
    ) -> None:
        self.assigner, self.key, self.pre = assigner, key, pre
        self.window = downstream(assigner, key, pre)
        self.output: list[pa.Table] = []
        self.late = 0
        self.locals = [
            OneInputHarness(
                WindowPreAggregateOperator(
                    assigner, AGGREGATES, key, "ts", poor_reduction=poor_reduction
                )
            )
            for _ in range(2)
        ]

    def feed(self, events: list[Event]) -> None:
        for channel, kind, value in events:
            if kind == "watermark":
                self.window.process_watermark(value, channel=channel)
            elif self.pre:
                writer = self.locals[channel].writer
                sent = len(writer.batches)
                self.locals[channel].process_batch(value)
                for batch in writer.batches[sent:]:
                    self.window.process_batch(batch, channel=channel)
            else:
                self.window.process_batch(value, channel=channel)

    def checkpoint_into(self, pre: bool, checkpoint_id: int) -> None:
        """End the epoch with a checkpoint and go on from it in the ``pre`` plan."""
        snapshot = self.window.checkpoint(checkpoint_id)
        self._keep()
        self.pre = pre
        self.window = downstream(self.assigner, self.key, pre, restore_from=snapshot)

    def finish(self) -> pa.Table:
        self.window.end_input()
        self._keep()
        return pa.concat_tables(self.output)

    def _keep(self) -> None:
        self.output.append(self.window.output())
        self.late += self.window.operators[0].late_records_dropped


ASSIGNERS = [TumblingEventTimeWindows.of(100), SlidingEventTimeWindows.of(120, 40)]
KEYS = [ColumnKey("k"), ColumnsKey(["k", "g"])]
MODES = {"partials": 2.0, "adaptive": 0.0}
"""The pre-aggregation's ``poor_reduction``: 2.0 always sends partials; 0.0 sends rows
for PROBE_EVERY batches after each batch of partials (both kinds on one channel)."""


@pytest.mark.parametrize("assigner", ASSIGNERS, ids=["tumbling", "sliding"])
@pytest.mark.parametrize("key", KEYS, ids=["one-column", "composite"])
@pytest.mark.parametrize("gather", [False, True], ids=["batches", "gathered"])
@pytest.mark.parametrize("mode", MODES)
def test_two_phase_equals_one_phase(
    assigner: Any, key: KeySelector, gather: bool, mode: str
) -> None:
    events = interleaved()
    if gather:
        events = gathered(events)
    one = Plan(assigner, key, pre=False)
    two = Plan(assigner, key, pre=True, poor_reduction=MODES[mode])
    for plan in (one, two):
        plan.feed(events)
    expected, got = one.finish(), two.finish()
    assert expected.num_rows > 100
    assert got.equals(expected)  # the same rows in the same order, floats bit for bit
    assert one.late == two.late > 0


def test_rows_late_by_their_own_channel_are_judged_downstream() -> None:
    """The data has rows late by their channel's watermark but not by the min over both
    channels; they are counted in windows by both plans, not dropped."""
    events = interleaved()
    own = [-(2**63)] * 2
    late_upstream = 0
    for channel, kind, value in events:
        if kind == "watermark":
            own[channel] = value
        else:
            ends = value.column("ts").to_numpy() // 100 * 100 + 99
            late_upstream += int((ends <= own[channel]).sum())
    plans = [Plan(TumblingEventTimeWindows.of(100), ColumnKey("k"), pre) for pre in (False, True)]
    for plan in plans:
        plan.feed(events)
        plan.finish()
    assert 0 < plans[0].late == plans[1].late < late_upstream


def run_with_checkpoints(assigner: Any, events: list[Event], plans: list[bool]) -> Plan:
    """Feed ``events`` in len(plans) epochs, epoch i in plan ``plans[i]``, each restored
    from the checkpoint that ended the one before."""
    plan = Plan(assigner, ColumnsKey(["k", "g"]), pre=plans[0], poor_reduction=0.0)
    cut = len(events) // len(plans) + 1
    for epoch, pre in enumerate(plans):
        if epoch:
            plan.checkpoint_into(pre, epoch)
        plan.feed(events[epoch * cut : (epoch + 1) * cut])
    return plan


@pytest.mark.parametrize("assigner", ASSIGNERS, ids=["tumbling", "sliding"])
@pytest.mark.parametrize("plans", [[True, True, True], [False, True, False], [True, False, True]])
def test_checkpoints_restore_across_the_plans(assigner: Any, plans: list[bool]) -> None:
    """The window state is the same in both plans: a checkpoint of one restores into the
    other (either way), with the output of the one-phase plan cut at the same places."""
    events = gathered(interleaved())
    reference = run_with_checkpoints(assigner, events, [False, False, False])
    plan = run_with_checkpoints(assigner, events, plans)
    expected, got = reference.finish(), plan.finish()
    assert expected.num_rows > 100
    assert got.equals(expected)
    assert plan.late == reference.late > 0


def test_the_switch_and_the_late_side_output_decide_the_plan() -> None:
    table = pa.table({"k": [1, 2], "ts": [5, 15], "v": [1, 2]})

    def operators(pre: bool, late: bool) -> list[str]:
        env = StreamExecutionEnvironment(parallelism=1)
        stream = env.from_arrow(table, watermark_strategy=WatermarkStrategy("ts", 0))
        windows = stream.key_by("k").window(TumblingEventTimeWindows.of(10))
        if late:
            windows = windows.side_output_late_data(OutputTag("late", table.schema))
        windows.aggregate_columns({"n": ("v", "count")}, pre_aggregate=pre)
        return [t.name for t in env.transformations]

    assert operators(True, False)[1:] == ["window_aggregate-preaggregate", "window_aggregate"]
    assert operators(False, False)[1:] == ["window_aggregate"]
    assert operators(True, True)[1:] == ["window_aggregate"]


def test_the_pre_aggregation_chains_to_its_input_at_the_input_s_parallelism() -> None:
    """A DataFrame source's subtasks are its partitions, counted when the job starts: the
    pre-aggregation takes that count too, so it stays in the source's task."""
    env = StreamExecutionEnvironment(parallelism=2)
    table = pa.table({"k": [1, 2], "ts": [5, 15], "v": [1, 2]})
    stream = env.from_arrow(table, watermark_strategy=WatermarkStrategy("ts", 0))
    windows = stream.key_by("k").window(TumblingEventTimeWindows.of(10))
    windows.aggregate_columns({"n": ("v", "count")})
    started = [dataclasses.replace(env.transformations[0], parallelism=5)]
    graph = build_job_graph(started + env.transformations[1:])
    chains = sorted((v.name, v.parallelism) for v in graph.vertices.values())
    assert chains == [
        ("source:collection -> window_aggregate-preaggregate", 5),
        ("window_aggregate", 2),
    ]


def test_a_pre_aggregation_that_cannot_chain_is_left_out() -> None:
    """Where the operator before key_by feeds another operator too, the pre-aggregation
    could not chain (it would cost an exchange of its own): the window reads the rows."""
    env = StreamExecutionEnvironment(parallelism=2)
    table = pa.table({"k": [1, 2], "ts": [5, 15], "v": [1, 2]})
    stream = env.from_arrow(table, watermark_strategy=WatermarkStrategy("ts", 0))
    windows = stream.key_by("k").window(TumblingEventTimeWindows.of(10))
    windows.aggregate_columns({"n": ("v", "count")})
    stream.map_batch(lambda batch: batch, name="also")
    graph = build_job_graph(env.transformations)
    chains = sorted(v.name for v in graph.vertices.values())
    assert chains == ["also", "source:collection", "window_aggregate"]
    (window,) = [v for v in graph.vertices.values() if v.name == "window_aggregate"]
    (source,) = [v for v in graph.vertices.values() if v.name == "source:collection"]
    assert [(upstream, p.kind) for upstream, _, p in window.inputs] == [(source.id, "hash")]
