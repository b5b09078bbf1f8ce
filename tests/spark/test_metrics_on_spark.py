"""Flink's metrics of keyed jobs on real local Spark, checked against the rows they were
sent: per vertex, subtask and epoch, a user counter, the Prometheus file and endpoint,
the stored result and ``flintlock metrics``."""

from __future__ import annotations

import itertools
import json
import re
import socket
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from flintlock import CollectSink, EpochTrigger, KeyedProcessFunction, StreamExecutionEnvironment
from flintlock.cli import main
from flintlock.core.api.watermarks import WatermarkStrategy
from flintlock.core.events import MAX_TIMESTAMP
from flintlock.core.exchange.key_groups import key_group_of, subtask_for_key_group

pytestmark = pytest.mark.slow

END, PER_EPOCH, KEYS, PARALLELISM = 900, 300, 7, 2
SOURCE, KEYED = "source:sequence -> addkey", "count -> collect"


class CountPerSubtask(KeyedProcessFunction):
    """Passes each row on with the subtask that saw it; counts rows in a user counter."""

    def open(self) -> None:
        self.seen = self.runtime_context.metric_group().counter("seen")
        self.subtask = self.runtime_context.task_info.subtask_index

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.seen.inc()
        out.collect({"k": value["k"], "id": value["id"], "subtask": self.subtask})


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def keyed_job(checkpoint_dir: Path) -> StreamExecutionEnvironment:
    """ids 0..899, 300 an epoch -> key id % 7 -> count per subtask -> collect."""
    env = StreamExecutionEnvironment(parallelism=PARALLELISM, checkpoint_dir=str(checkpoint_dir))
    strategy = WatermarkStrategy.for_monotonous_timestamps("event_time")
    (
        env.from_sequence(end=END, rows_per_epoch=PER_EPOCH, watermark_strategy=strategy)
        .map(lambda r: {**r, "k": r["id"] % KEYS}, name="addkey")
        .key_by("k")
        .process(CountPerSubtask(), name="count")
        .sink_to(CollectSink(), name="collect")
    )
    return env


def expected_keyed_counts(ids: range) -> Counter[int]:
    """Rows per keyed subtask, from the key groups of the keys (Flink's assignment)."""
    return Counter(subtask_for_key_group(key_group_of(i % KEYS), PARALLELISM, 128) for i in ids)


def source_split(epoch: int) -> list[int]:
    """Rows per source subtask in an epoch: the sequence splits its range evenly."""
    first = epoch * PER_EPOCH
    bounds = np.linspace(first, first + PER_EPOCH, PARALLELISM + 1).astype(np.int64)
    return [int(b - a) for a, b in itertools.pairwise(bounds)]


def per_subtask(figures: dict[str, Any], key: str) -> dict[int, int]:
    return {int(i): s[key] for i, s in figures["subtasks"].items()}


def test_a_keyed_jobs_metrics_match_the_rows_it_was_sent(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    scraped: list[dict[str, Any]] = []

    def scrape(figures: dict[str, Any]) -> None:  # the endpoint, while the job runs
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        families = {f.name: f for f in text_string_to_metric_families(text)}
        scraped.append({**figures, "served": families["flintlock_job_epoch"].samples[0].value})

    run = keyed_job(tmp_path / "chk").execute(
        "counted", trigger=EpochTrigger.available_now(), progress=scrape, metrics_port=port
    )
    rows = run.collected["collect"].to_pylist()
    metrics = run.metrics
    epochs = metrics["epochs"]
    assert len(rows) == END and run.epochs == len(epochs) == END // PER_EPOCH
    assert [s["served"] for s in scraped] == [1.0, 2.0, 3.0]

    for number, document in enumerate(epochs):
        ids = range(number * PER_EPOCH, (number + 1) * PER_EPOCH)
        source = document["vertices"][SOURCE]
        assert per_subtask(source, "numRecordsIn") == dict(enumerate(source_split(number)))
        assert per_subtask(source, "numRecordsOut") == dict(enumerate(source_split(number)))
        keyed = document["vertices"][KEYED]
        expected = expected_keyed_counts(ids)
        assert per_subtask(keyed, "numRecordsIn") == dict(expected)
        for index, sub in keyed["subtasks"].items():
            count = sub["operators"]["count"]
            assert count["numRecordsIn"] == count["numRecordsOut"] == expected[int(index)]
            assert count["user"]["counters"] == {"seen": expected[int(index)]}
        assert keyed["operators"]["count"]["user"]["counters"] == {"seen": PER_EPOCH}
        mark = keyed["currentInputWatermark"]
        assert scraped[number]["watermarks"][KEYED] == mark
        if number < len(epochs) - 1:  # event time is the id: the watermark trails the epoch
            assert mark is not None and 0 <= mark < (number + 1) * PER_EPOCH
        else:
            assert mark == MAX_TIMESTAMP  # the input ended
        wall = document["intervalSeconds"]  # since the previous epoch: Flink's wall clock
        assert wall >= document["seconds"] > 0
        for sub in keyed["subtasks"].values():
            assert sub["numRecordsInPerSecond"] == pytest.approx(sub["numRecordsIn"] / wall)
            assert sub["busyTimeMsPerSecond"] == pytest.approx(sub["busyTimeMs"] / wall)
            assert sub["busyTimeMs"] <= sub["durationMs"] <= wall * 1e3
        assert document["checkpoint"]["sizeBytes"] == sum(
            sum(s.values()) for s in document["checkpoint"]["bytesPerSubtask"].values()
        )

    # the run's totals: what each keyed subtask's sink received, counted from the rows
    received = Counter(row["subtask"] for row in rows)
    assert received == expected_keyed_counts(range(END))
    totals = metrics["totals"]["vertices"]
    assert per_subtask(totals[KEYED], "numRecordsIn") == dict(received)
    assert per_subtask(totals[KEYED], "numRecordsOut") == dict(received)
    assert totals[SOURCE]["numRecordsOut"] == totals[KEYED]["numRecordsIn"] == END
    assert totals[KEYED]["operators"]["count"]["user"]["counters"] == {"seen": END}

    # the Prometheus file in the job folder carries the same numbers
    text = (tmp_path / "chk" / "counted" / "metrics" / "metrics.prom").read_text()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["flintlock_task_numRecordsIn"].type == "counter"  # the run's, as Flink's
    served = {
        (s.labels["task_name"], int(s.labels["subtask_index"])): s.value
        for s in families["flintlock_task_numRecordsIn"].samples
    }
    assert {i: served[(KEYED, i)] for i in received} == {i: float(n) for i, n in received.items()}
    assert sum(v for (task, _), v in served.items() if task == SOURCE) == END
    seen = {
        int(s.labels["subtask_index"]): s.value
        for s in families["flintlock_operator_user_seen"].samples
    }
    assert seen == {i: float(n) for i, n in received.items()}  # the user counter: the run's

    # the table: the drained input's watermark is its end, not Long.MAX through a float
    assert main(["metrics", str(tmp_path / "chk" / "counted")]) == 0
    table = capsys.readouterr().out
    keyed_line = next(line for line in table.splitlines() if line.startswith(KEYED))
    assert "end of input" in keyed_line and "9,223,372" not in table


class Double(KeyedProcessFunction):
    def open(self) -> None:
        self.meter = self.runtime_context.metric_group().meter("rows")

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.meter.mark_event()
        out.collect({"k": value["k"], "v": value["v"] * 2})


def bounded_job(checkpoint_dir: Path) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment(parallelism=PARALLELISM, checkpoint_dir=str(checkpoint_dir))
    rows = [{"k": f"key{i % 5}", "v": i} for i in range(100)]
    stream = env.from_collection(rows).key_by("k").process(Double(), name="double")
    stream.sink_to(CollectSink(), name="collect")
    return env


def test_a_bounded_jobs_metrics_are_kept_returned_again_and_shown(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = bounded_job(tmp_path / "chk").execute("bounded")
    totals = first.metrics["totals"]["vertices"]
    keyed = next(name for name in totals if name.startswith("double"))
    assert totals[keyed]["numRecordsIn"] == 100
    assert totals[keyed]["operators"]["double"]["user"] == {"meters": {"rows": {"count": 100}}}
    again = bounded_job(tmp_path / "chk").execute("bounded")  # FINISHED: the stored result
    assert again.already_finished and again.metrics == json.loads(json.dumps(first.metrics))

    assert main(["metrics", str(tmp_path / "chk" / "bounded")]) == 0
    table = capsys.readouterr().out.splitlines()
    line = next(line for line in table if line.startswith(keyed))
    assert line[len(keyed) :].split()[:2] == ["100", "100"]
    assert "  double  rows  meter  100" in " ".join(table[-1:]) or any(
        line.startswith("  double  rows  meter  100 ") for line in table
    )
    assert main(["metrics", str(tmp_path / "chk" / "bounded"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["totals"] == again.metrics["totals"]


def test_metrics_off_keeps_none(spark: Any, tmp_path: Path) -> None:
    run = bounded_job(tmp_path / "chk").execute("quiet", metrics=False)
    assert run.metrics == {} and run.collected["collect"].num_rows == 100
    assert not (tmp_path / "chk" / "quiet" / "metrics").exists()


def test_the_readme_metrics_block_counts_what_plain_python_counts(
    spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    (block,) = re.findall(r"^```python metrics\n(.*?)^```", readme, re.S | re.M)
    namespace: dict[str, Any] = {"__name__": "readme_metrics"}
    exec(compile(block, "README.md metrics block", "exec"), namespace)
    orders = namespace["orders"]
    vertex = namespace["vertex"]
    owners = Counter(
        subtask_for_key_group(key_group_of(o["user"]), PARALLELISM, 128) for o in orders
    )
    assert per_subtask(vertex, "numRecordsIn") == dict(owners)
    large = sum(1 for o in orders if o["amount"] >= 100)
    assert vertex["operators"]["flag"]["user"]["counters"] == {"large": large}
    amounts = namespace["run"].metrics["epochs"][0]["vertices"]["flag -> collect"]["operators"]
    assert amounts["flag"]["user"]["histograms"]["amount"]["max"] == max(
        o["amount"] for o in orders
    )
    # the shell lines name the job the block ran: checkpoints/orders
    (shell,) = re.findall(r"^```text\n(flintlock metrics .*?)^```", readme, re.S | re.M)
    assert {line.split()[2] for line in shell.splitlines()} == {"checkpoints/orders"}
    assert main(["metrics", f"{namespace['folder']}/checkpoints/orders"]) == 0
    assert any(line.startswith("flag -> collect") for line in capsys.readouterr().out.splitlines())
