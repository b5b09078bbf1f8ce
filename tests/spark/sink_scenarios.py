"""The scenarios every exactly-once sink must pass on real Spark (issue 21), shared by the
FileSink, Delta, Iceberg and PostgreSQL tests so each sink is judged by the same rules.

A sink's test hands in how to make the sink (``make_sink(parallelism)``) and how to read
its output back with the system's own reader (``read_back() -> list of row dicts``); the
scenario runs the job of ``unbounded_jobs`` (a sequence -> keyed running sum) and checks
the rows against a plain-Python reference: every id once, each key's final total, and
with drain one timer row per key carrying the key's total.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import unbounded_jobs
from pyspark import cloudpickle
from unbounded_jobs import KEYS, build, wait_for_epochs

from flintlock.core.api.sink import TwoPhaseCommitSink
from flintlock.core.datastream.environment import StreamExecutionEnvironment

cloudpickle.register_pickle_by_value(unbounded_jobs)  # workers cannot import tests/

MakeSink = Callable[[], TwoPhaseCommitSink]
ReadBack = Callable[[], list[dict[str, Any]]]
PER_EPOCH = 300


def one_pass(ids: list[int]) -> dict[int, int]:
    """Each key's total over ``ids``, in one pass."""
    totals: dict[int, int] = {}
    for i in ids:
        totals[i % KEYS] = totals.get(i % KEYS, 0) + i
    return totals


def check_exactly_once(rows: list[dict[str, Any]], count: int, drained: bool) -> None:
    """``rows`` hold ids 0..count-1 once each, with their keys, the right final totals,
    and (``drained``) one timer row (id -1) per key with its total, else none."""
    data = [r for r in rows if r["id"] >= 0]
    timers = [r for r in rows if r["id"] < 0]
    ids = sorted(r["id"] for r in data)
    assert ids == list(range(count)), _difference(ids, count)
    assert all(r["k"] == r["id"] % KEYS for r in data)
    reference = one_pass(ids)
    finals: dict[int, int] = {}
    for row in data:
        finals[row["k"]] = max(finals.get(row["k"], 0), row["total"])
    assert finals == reference
    expected_timers = sorted(reference.items()) if drained else []
    assert sorted((r["k"], r["total"]) for r in timers) == expected_timers


def _difference(ids: list[int], count: int) -> str:
    seen: dict[int, int] = {}
    for i in ids:
        seen[i] = seen.get(i, 0) + 1
    duplicates = sorted(i for i, n in seen.items() if n > 1)[:10]
    missing = sorted(set(range(count)) - set(seen))[:10]
    return f"{len(ids)} rows for {count} ids: duplicates {duplicates}, missing {missing}"


def bounded_job(spark: Any, base: str, sink: TwoPhaseCommitSink, rows: int = 1000) -> None:
    """A bounded program (collection -> keyed running sum -> sink) run to its end."""
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=f"{base}/chk")
    data = pa.table(
        {"id": pa.array(range(rows), pa.int64()), "event_time": pa.array(range(rows), pa.int64())}
    )
    from flintlock import WatermarkStrategy

    strategy = WatermarkStrategy.for_monotonous_timestamps("event_time")
    stream = env.from_arrow(data, watermark_strategy=strategy)
    function = unbounded_jobs.RunningSumUntilTheEnd()
    stream.key_by(lambda row: row["id"] % KEYS).process(function).sink_to(sink, name="out")
    result = env.execute("bounded")
    assert result.status == "FINISHED"


def stop_resume_at_another_parallelism_and_drain(
    spark: Any, base: str, make_sink: MakeSink, read_back: ReadBack
) -> None:
    """Parallelism 2, stopped with a savepoint (no finish: no timer rows); resumed from it
    at parallelism 3 and stopped with drain: every row once, timers fired once per key."""
    client = build(spark, base, sink=make_sink(), parallelism=2).execute_async("unbounded")
    wait_for_epochs(client, 3)
    savepoint = client.stop()
    stopped = client.result()
    assert stopped.status == "STOPPED" and stopped.savepoint_path == savepoint
    check_exactly_once(read_back(), PER_EPOCH * stopped.epochs, drained=False)

    env = build(spark, base, sink=make_sink(), parallelism=3)
    client = env.execute_async("unbounded", restore_from=savepoint)
    wait_for_epochs(client, 2, after_run=stopped.run_id)
    client.stop(drain=True)
    drained = client.result()
    assert drained.status == "FINISHED"  # a drain ends the input
    check_exactly_once(read_back(), PER_EPOCH * (stopped.epochs + drained.epochs), drained=True)
