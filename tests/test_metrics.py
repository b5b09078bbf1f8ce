"""Metrics without Spark: the user metric group, a subtask's metrics in its acknowledgement
(in the harness), the driver's aggregation, Prometheus' text and the CLI's table."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from acknowledgements import acknowledgement
from prometheus_client.parser import text_string_to_metric_families

from flintlock import KeyedProcessFunction, ValueStateDescriptor
from flintlock.cli import main
from flintlock.core.checkpoint.snapshots import TaskAcknowledgement
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.events import MAX_TIMESTAMP
from flintlock.core.metrics.aggregate import epoch_document, merge_user, run_totals, watermarks
from flintlock.core.metrics.prometheus import FlintlockCollector, MetricsServer, exposition
from flintlock.core.metrics.recorder import METRICS_PORT_ENV, MetricsRecorder, metrics_options
from flintlock.core.metrics.user import Histogram, Meter, MetricGroup
from flintlock.errors import MetricError, MetricsUnavailable
from flintlock.metrics_table import metrics_table
from flintlock.metrics_table import number as metrics_number
from flintlock.operators.process import KeyedProcessOperator
from flintlock.testing import OneInputHarness

# ---- the user metric group ----


def test_counter_meter_and_gauge_follow_flinks_shapes() -> None:
    group = MetricGroup()
    counter = group.counter("seen")
    counter.inc()
    counter.inc(10)
    counter.dec(3)
    assert group.counter("seen") is counter and counter.get_count() == 8
    now = [0.0]
    meter = Meter(clock=lambda: now[0])
    meter.mark_event(30)
    now[0] = 3.0
    assert (meter.get_count(), meter.get_rate()) == (30, 10.0)
    level = [1]
    group.gauge("level", lambda: level[0])
    level[0] = 7  # a gauge is read when the metrics are taken, not when it is made
    assert group.values()["gauges"] == {"level": 7}
    assert group.values()["counters"] == {"seen": 8}


def test_histogram_statistics_match_an_independent_reference() -> None:
    values = [float(v) for v in [5, 1, 9, 3, 7, 2, 8, 4, 6, 10, 100]]
    histogram = Histogram()
    for value in values:
        histogram.update(value)
    found = histogram.get_statistics()
    cuts = statistics.quantiles(values, n=100, method="inclusive")  # linear, as numpy's
    assert found["count"] == 11
    assert (found["min"], found["max"]) == (1.0, 100.0)
    assert found["mean"] == pytest.approx(statistics.fmean(values))
    assert found["stddev"] == pytest.approx(statistics.pstdev(values))
    assert found["p50"] == pytest.approx(statistics.median(values))
    assert (found["p75"], found["p95"]) == (pytest.approx(cuts[74]), pytest.approx(cuts[94]))


def test_histogram_keeps_a_window_but_counts_everything() -> None:
    histogram = Histogram(window_size=4)
    for value in range(100):
        histogram.update(value)
    found = histogram.get_statistics()
    assert (found["count"], found["min"], found["max"]) == (100, 96.0, 99.0)


def test_names_are_unique_per_kind_and_groups_prefix_them() -> None:
    group = MetricGroup()
    group.counter("n")
    with pytest.raises(MetricError, match="'n' is a Counter, asked for as a Meter"):
        group.meter("n")
    with pytest.raises(MetricError, match="non-empty"):
        group.counter("")
    group.add_group("io").add_group("reads").counter("n").inc(2)
    assert group.values()["counters"] == {"io.reads.n": 2, "n": 0}


# ---- a subtask's metrics, in the harness ----


class CountingTotal(KeyedProcessFunction):
    """A running total per key that counts its records and batches in user metrics."""

    def open(self) -> None:
        self.total = self.runtime_context.get_state(
            ValueStateDescriptor("total", pa.int64(), default=0)
        )
        group = self.runtime_context.metric_group()
        self.records = group.counter("records")
        self.amounts = group.histogram("amounts")
        group.gauge("answer", lambda: 42)

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.records.inc()
        self.amounts.update(value["amount"])
        self.total.update(self.total.value() + value["amount"])
        out.collect({"user": value["user"], "total": self.total.value()})


def test_a_subtasks_acknowledgement_carries_its_metrics() -> None:
    operator = KeyedProcessOperator(CountingTotal(), key_column="user", name="totals")
    harness = OneInputHarness(operator)
    harness.process_records([{"user": "a", "amount": 1}, {"user": "b", "amount": 2}])
    harness.process_records([{"user": "a", "amount": 3}])
    harness.process_watermark(1_000)
    harness.checkpoint(1)
    ack = harness.acknowledgement
    assert ack is not None
    metrics = ack.metrics
    assert (metrics["numRecordsIn"], metrics["numRecordsOut"]) == (3, 3)
    totals = metrics["operators"]["totals"]
    assert (totals["numRecordsIn"], totals["numRecordsOut"]) == (3, 3)
    assert totals["currentInputWatermark"] == metrics["currentInputWatermark"] == 1_000
    assert totals["stateSizeBytes"] > 0  # the keyed state file of "total"
    assert metrics["checkpointSizeBytes"] == totals["stateSizeBytes"] + ack.size_bytes
    assert totals["user"]["counters"] == {"records": 3}
    assert totals["user"]["gauges"] == {"answer": 42}
    assert totals["user"]["histograms"]["amounts"]["mean"] == pytest.approx(2.0)
    assert 0 <= metrics["busyTimeMs"] <= metrics["durationMs"]


# ---- the driver's aggregation ----


def ack(
    task: str, subtask: int, records: int, mark: int | None, counter: int
) -> TaskAcknowledgement:
    """An acknowledgement as the driver reads it, its metrics written by hand."""
    operators = {
        "op": {
            "numRecordsIn": records,
            "numRecordsOut": records,
            "currentInputWatermark": mark,
            "stateSizeBytes": 100,
            "user": {"counters": {"c": counter}, "meters": {"m": {"count": 4, "rate": 2.0}}},
        }
    }
    metrics = {
        "time": 10.0,
        "numRecordsIn": records,
        "numRecordsOut": records,
        "durationMs": 2_000.0,
        "busyTimeMs": 500.0 * (subtask + 1),
        "idleTimeMs": 0.0,
        "currentInputWatermark": mark,
        "stateSizeBytes": 100,
        "checkpointDurationMs": 5.0 + subtask,
        "checkpointSizeBytes": 150,
        "operators": operators,
    }
    return acknowledgement(
        task, subtask, records_in=records, records_out=records, size_bytes=50, metrics=metrics
    )


EPOCH = {
    "epoch": 1,
    "checkpoint_id": 3,
    "kind": "checkpoint",
    "final": False,
    "seconds": 2.5,
    "intervalSeconds": 10.0,  # since the previous epoch: its subtasks ran 2 s of it
}


def test_an_epoch_sums_subtasks_and_takes_the_least_watermark() -> None:
    acks = [ack("v", 0, 10, 4_000, 1), ack("v", 1, 30, 6_000, 2), ack("w", 0, 5, None, 0)]
    document = epoch_document(acks, EPOCH)
    v = document["vertices"]["v"]
    assert (v["numRecordsIn"], v["numRecordsOut"], v["parallelism"]) == (40, 40, 2)
    assert v["numRecordsInPerSecond"] == pytest.approx(4.0)  # 40 rows in 10 s of wall time
    assert v["busyTimeMsPerSecond"] == pytest.approx(100.0)  # the busiest: 1 s busy of 10
    assert v["currentInputWatermark"] == 4_000
    assert v["watermarkLagMs"] == pytest.approx(10_000 - 4_000)
    assert v["subtasks"]["1"]["watermarkLagMs"] == pytest.approx(10_000 - 6_000)
    assert v["operators"]["op"]["user"] == {
        "counters": {"c": 3},
        "meters": {"m": {"count": 8, "rate": 0.8}},  # per wall second, not per 2 s ran
    }
    assert watermarks(document) == {"v": 4_000, "w": None}
    checkpoint = document["checkpoint"]
    assert checkpoint["sizeBytes"] == 450
    assert checkpoint["bytesPerSubtask"] == {"v": {"0": 150, "1": 150}, "w": {"0": 150}}
    assert (checkpoint["durationMs"], checkpoint["epochDurationMs"]) == (6.0, 2_500.0)


def test_a_finished_subtask_counts_nothing_and_holds_no_watermark_back() -> None:
    finished = replace(ack("v", 1, 0, None, 0), metrics={})
    document = epoch_document([ack("v", 0, 10, 4_000, 1), finished], EPOCH)
    v = document["vertices"]["v"]
    assert (v["numRecordsIn"], v["currentInputWatermark"]) == (10, 4_000)
    assert v["subtasks"]["1"]["finished"] is True


def test_run_totals_add_epochs_per_vertex_subtask_and_operator() -> None:
    first = epoch_document([ack("v", 0, 10, 1, 1), ack("v", 1, 30, 1, 2)], EPOCH)
    second = epoch_document([ack("v", 0, 7, 2, 5), ack("v", 1, 0, 2, 0)], EPOCH)
    totals = run_totals([first, second])
    v = totals["vertices"]["v"]
    assert (totals["epochs"], v["numRecordsIn"], v["numRecordsOut"]) == (2, 47, 47)
    assert {i: (s["numRecordsIn"], s["numRecordsOut"]) for i, s in v["subtasks"].items()} == {
        "0": (17, 17),
        "1": (30, 30),
    }
    op = v["subtasks"]["0"]["operators"]["op"]  # each subtask's operators count the run too
    assert (op["numRecordsIn"], op["user"]) == (
        17,
        {"counters": {"c": 6}, "meters": {"m": {"count": 8}}},
    )
    assert v["operators"]["op"]["user"] == {"counters": {"c": 8}, "meters": {"m": {"count": 16}}}


def test_histograms_merge_count_min_max_and_weighted_mean() -> None:
    parts = [
        {"histograms": {"h": {"count": 1, "min": 1.0, "max": 1.0, "mean": 1.0, "p50": 1.0}}},
        {"histograms": {"h": {"count": 3, "min": 2.0, "max": 9.0, "mean": 5.0, "p50": 4.0}}},
        {"histograms": {"h": {"count": 0}}},
    ]
    merged = merge_user(parts)["histograms"]["h"]
    assert merged == {"count": 4, "min": 1.0, "max": 9.0, "mean": 4.0}


# ---- Prometheus and the table ----


def test_the_prometheus_text_parses_and_carries_the_figures() -> None:
    document = epoch_document([ack("v", 0, 10, 4_000, 1), ack("v", 1, 30, 6_000, 2)], EPOCH)
    collector = FlintlockCollector("job")
    collector.update(document, run_totals([document]))
    families = {f.name: f for f in text_string_to_metric_families(exposition(collector))}
    found = {
        (s.labels["subtask_index"], s.value)
        for s in families["flintlock_task_numRecordsIn"].samples
    }
    assert found == {("0", 10.0), ("1", 30.0)}
    user = families["flintlock_operator_user_c"].samples
    assert {(s.labels["operator_name"], s.value) for s in user} == {("op", 1.0), ("op", 2.0)}
    marks = families["flintlock_task_currentInputWatermark"].samples
    assert sorted(s.value for s in marks) == [4_000.0, 6_000.0]
    assert families["flintlock_job_lastCheckpointSize"].samples[0].value == 300.0


def test_the_table_shows_every_vertex_subtask_and_user_metric() -> None:
    document = epoch_document([ack("v", 0, 10, 4_000, 1), ack("v", 1, 30, 6_000, 2)], EPOCH)
    table = metrics_table({"run_id": "r", "epochs": [document], "totals": run_totals([document])})
    lines = table.splitlines()
    assert lines[0].startswith("run r  epochs 1  last checkpoint chk-3 0.3 kB")
    vertex = next(line for line in lines if line.startswith("v "))
    assert vertex.split()[1:3] == ["40", "40"]
    assert [line.split()[:3] for line in lines if line.startswith("  #")] == [
        ["#0", "10", "10"],
        ["#1", "30", "30"],
    ]
    assert "  op  c  counter  3" in lines
    assert "  op  m  meter  8 (0.8/s)" in lines


def test_the_endpoint_serves_the_collector_and_a_taken_port_is_a_flintlock_error() -> None:
    document = epoch_document([ack("v", 0, 10, 4_000, 1)], EPOCH)
    collector = FlintlockCollector("job")
    collector.update(document, run_totals([document]))
    server = MetricsServer(collector, 0, "127.0.0.1")
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            families = {f.name: f for f in text_string_to_metric_families(answer.read().decode())}
        assert families["flintlock_task_numRecordsIn"].samples[0].value == 10.0
        with pytest.raises(MetricsUnavailable, match=f"port {server.port}"):
            MetricsServer(collector, server.port, "127.0.0.1")
    finally:
        server.close()


def test_operators_get_rates_per_wall_second_and_lag() -> None:
    document = epoch_document([ack("v", 0, 10, 4_000, 1), ack("v", 1, 30, 6_000, 2)], EPOCH)
    sub = document["vertices"]["v"]["subtasks"]["1"]["operators"]["op"]
    assert sub["numRecordsOutPerSecond"] == pytest.approx(3.0)  # 30 rows in 10 s
    assert sub["watermarkLagMs"] == pytest.approx(10_000 - 6_000)
    assert document["vertices"]["v"]["operators"]["op"]["numRecordsInPerSecond"] == 4.0


def test_flintlock_run_passes_the_metrics_port_to_the_job(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    seen = tmp_path / "seen.txt"
    job.write_text(f"import os\nopen({str(seen)!r}, 'w').write(os.environ['{METRICS_PORT_ENV}'])\n")
    assert main(["run", "--metrics-port", "9349", str(job)]) == 0
    assert seen.read_text() == "9349" and METRICS_PORT_ENV not in os.environ
    assert metrics_options(None, None) == (True, None)
    os.environ["FLINTLOCK_METRICS"] = "0"
    try:
        assert metrics_options(None, 5) == (False, 5)
    finally:
        del os.environ["FLINTLOCK_METRICS"]


# ---- Flink's meanings: wall-clock rates, counters, the end of input ----


def test_rates_and_busy_time_are_per_wall_second_between_epochs(tmp_path: Path) -> None:
    """A source at 50 rows/s, epochs 0.5 s apart: each Spark task runs ~20 ms of them,
    busy throughout. Flink would say 50 rows/s and ~40 busy ms/s, not 1,250 and 1,000."""
    storage = CheckpointStorage.from_uri(str(tmp_path))
    recorder = MetricsRecorder(storage, str(tmp_path / "job"), "job", "run-1")
    fields = {"kind": "checkpoint", "final": False, "seconds": 0.03}

    def epoch_acks() -> list[TaskAcknowledgement]:
        acks = [ack("source", 0, 25, None, 0)]
        acks[0].metrics.update(durationMs=20.0, busyTimeMs=20.0, time=time.time())
        return acks

    recorder.record(epoch_acks(), {"epoch": 1, "checkpoint_id": 1, **fields})
    time.sleep(0.5)  # the trigger's wait
    second = recorder.record(epoch_acks(), {"epoch": 2, "checkpoint_id": 2, **fields})
    assert second is not None
    assert 0.5 <= second["intervalSeconds"] < 1.5
    source = second["vertices"]["source"]
    assert 16 < source["numRecordsInPerSecond"] <= 50  # 25 rows in >= 0.5 s
    assert 13 < source["busyTimeMsPerSecond"] <= 40  # 20 ms busy in >= 0.5 s
    meter = source["subtasks"]["0"]["operators"]["op"]["user"]["meters"]["m"]
    assert meter["rate"] == pytest.approx(4 / second["intervalSeconds"])
    table = metrics_table(recorder.summary())
    cells = next(line for line in table.splitlines() if line.startswith("source")).split()
    assert cells[1:3] == ["50", "50"]  # the run's records: 25 + 25
    assert int(cells[3]) <= 50 and int(cells[5]) <= 40  # in/s and busy ms/s


def test_a_drained_jobs_watermark_reads_as_the_end_of_its_input() -> None:
    ended = epoch_document([ack("v", 0, 10, MAX_TIMESTAMP, 1)], EPOCH)
    table = metrics_table({"run_id": "r", "epochs": [ended], "totals": run_totals([ended])})
    vertex = next(line for line in table.splitlines() if line.startswith("v "))
    assert "end of input" in vertex
    assert "9,223,372" not in table
    assert metrics_number(2**53 + 1) == "9,007,199,254,740,993"  # integers exactly


def test_the_prometheus_text_types_run_counts_as_counters_and_the_rest_as_gauges() -> None:
    first = epoch_document([ack("v", 0, 10, 4_000, 1), ack("v", 1, 30, 6_000, 2)], EPOCH)
    second = epoch_document([ack("v", 0, 7, 5_000, 5), ack("v", 1, 1, 7_000, 0)], EPOCH)
    collector = FlintlockCollector("job")
    collector.update(second, run_totals([first, second]))
    families = {f.name: f for f in text_string_to_metric_families(exposition(collector))}
    counters = {name for name, family in families.items() if family.type == "counter"}
    assert counters == {
        "flintlock_task_numRecordsIn",
        "flintlock_task_numRecordsOut",
        "flintlock_operator_numRecordsIn",
        "flintlock_operator_numRecordsOut",
        "flintlock_operator_user_m",  # a meter's events
    }
    records = families["flintlock_task_numRecordsIn"].samples
    assert {(s.name, s.labels["subtask_index"], s.value) for s in records} == {
        ("flintlock_task_numRecordsIn_total", "0", 17.0),  # the run: 10 + 7
        ("flintlock_task_numRecordsIn_total", "1", 31.0),
    }
    operator = families["flintlock_operator_numRecordsOut"].samples
    assert sorted(s.value for s in operator) == [17.0, 31.0]
    user = families["flintlock_operator_user_c"]  # may go down (dec): a gauge of the run
    assert (user.type, sorted(s.value for s in user.samples)) == ("gauge", [2.0, 6.0])
    for name in ("busyTimeMsPerSecond", "numRecordsInPerSecond", "currentInputWatermark"):
        assert families[f"flintlock_task_{name}"].type == "gauge"


WHERE_AM_I = "from flintlock.core.metrics.subtask import executor_of_this_process as e; print(e())"


def test_a_subtask_finds_its_executor_id_in_the_executor_processes_arguments() -> None:
    """As on a cluster: the executor JVM (here a process with the same ``--executor-id 7``
    arguments) starts pyspark's daemon, which forks the Python worker; nothing in the
    environment names the executor (as on YARN). Without such a parent: None."""
    spawn = "import subprocess, sys; subprocess.run([sys.executable, '-c', sys.argv[1]])"
    daemon = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {WHERE_AM_I!r}])"
    hidden = {"SPARK_EXECUTOR_ID", "SPARK_LOG_URL_STDERR"}
    environment = {k: v for k, v in os.environ.items() if k not in hidden}
    under_executor = [sys.executable, "-c", spawn, daemon, "--executor-id", "7", "--cores", "1"]
    without = [sys.executable, "-c", spawn, daemon, "--cores", "1"]
    found = [
        subprocess.run(c, capture_output=True, text=True, env=environment, check=True).stdout
        for c in (under_executor, without)
    ]
    assert "'id': '7'" in found[0], found[0]
    assert "'id': None" in found[1], found[1]
