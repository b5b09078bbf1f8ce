"""examples/kafka_orders_job.py end to end on the session's broker: orders produced with
known timestamps (tests/kafka_records.py: order i at BASE_MS + i s, partition i mod 2),
the job run unbounded, and both outputs — a read_committed consumer of the totals topic
and the Delta table — equal to a plain-Python reference of the fired windows, every
window once, across a second run, a savepoint restored at another parallelism, a driver
killed inside the Kafka commit, a broker restart mid-epoch and a task failure."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from delta_tables import read_delta
from deltalake import DeltaTable
from job_scripts import run_script
from kafka_pipeline_job import load_example
from kafka_records import BASE_MS, order, produce_orders
from kafka_server import KafkaBroker

from flintlock import (
    DeltaSink,
    EpochTrigger,
    FlintlockError,
    JobExecutionResult,
    StreamExecutionEnvironment,
)
from flintlock.sinks.kafka import KafkaSink
from flintlock.sinks.kafka_commit import TransactionalCommitter

pytestmark = pytest.mark.slow
example = load_example()
SCRIPT = Path(__file__).with_name("kafka_pipeline_job.py")
PARTITIONS = 2
AVAILABLE_NOW = EpochTrigger.available_now()


def fired_windows(sent: int) -> list[dict[str, Any]]:
    """The rows the job emits once orders 0 .. ``sent``-1 (a multiple of 10) were read:
    every 10 s window but the last, whose end the watermark (out-of-orderness 0) has not
    passed; per customer, with the running total over the customer's windows."""
    assert sent % 10 == 0
    windows: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for i in range(sent - 10):
        row = order(i)
        start = BASE_MS + i * 1000 // example.WINDOW_MS * example.WINDOW_MS
        windows[row["customer"], start][0] += 1
        windows[row["customer"], start][1] += row["amount"]
    rows, totals = [], defaultdict(int)
    for (customer, start), (count, amount) in sorted(windows.items(), key=lambda w: w[0][1]):
        totals[customer] += amount
        end = start + example.WINDOW_MS
        rows.append(
            {"customer": customer, "window_start": start, "window_end": end, "orders": count}
            | {"amount": amount, "running_total": totals[customer]}
        )
    return sorted(rows, key=window_order)


def window_order(row: dict[str, Any]) -> tuple[str, int]:
    return row["customer"], row["window_start"]


class Pipeline:
    """One test's topics and folders, the example's settings for them, and its outputs."""

    def __init__(self, kafka: KafkaBroker, base: Path) -> None:
        self.kafka, self.base = kafka, base
        tag = uuid.uuid4().hex[:8]
        self.orders = kafka.create_topic(f"orders-{tag}", PARTITIONS)
        self.totals = kafka.create_topic(f"totals-{tag}", PARTITIONS)
        self.sent = 0

    def produce(self, count: int) -> None:
        ids = range(self.sent, self.sent + count)
        produce_orders(self.kafka, self.orders, ids, PARTITIONS)
        self.sent += count

    def settings(self, parallelism: int = 2, trigger: str = "available-now") -> list[str]:
        return [
            *("--bootstrap", self.kafka.bootstrap, "--orders", self.orders),
            *("--totals", self.totals, "--table", str(self.base / "totals")),
            *("--checkpoints", str(self.base / "chk"), "--parallelism", str(parallelism)),
            *("--trigger", trigger, "--out-of-orderness", "0"),
        ]

    def run(self, spark: Any, *more: str, parallelism: int = 2) -> JobExecutionResult:
        return example.main([*self.settings(parallelism), *more], spark)

    def kafka_rows(self) -> list[dict[str, Any]]:
        """The totals topic as a read_committed consumer reads it (keys checked)."""
        records = self.kafka.records(self.totals)
        rows = [json.loads(record.value()) for record in records]
        assert [r.key() for r in records] == [row["customer"].encode() for row in rows]
        return sorted(rows, key=window_order)

    def delta_rows(self) -> list[dict[str, Any]]:
        if not DeltaTable.is_deltatable(str(self.base / "totals")):
            return []
        return sorted(read_delta(self.base / "totals").to_pylist(), key=window_order)

    def with_fault(
        self, spark: Any, fault: Any, sink_type: type[KafkaSink] = KafkaSink
    ) -> StreamExecutionEnvironment:
        """The example's job at parallelism 2 with ``fault`` (a batch function) between
        reading and windowing, and a KafkaSink of ``sink_type``, ready to run."""
        env = StreamExecutionEnvironment(
            parallelism=2, spark=spark, checkpoint_dir=str(self.base / "chk")
        )
        orders = example.read_orders(env, self.kafka.bootstrap, self.orders, 0)
        windows = example.windows_per_customer(orders.map_batch(fault, name="fault"))
        kafka = sink_type(self.totals, self.kafka.bootstrap, key="customer")
        example.write(windows, kafka, DeltaSink(str(self.base / "totals")))
        return env

    def check_every_window_once(self, read: int | None = None) -> None:
        """Both outputs hold the windows of the orders read (default: all sent)."""
        expected = fired_windows(self.sent if read is None else read)
        assert self.kafka_rows() == expected
        assert self.delta_rows() == expected


def test_a_second_run_continues_from_the_checkpointed_offsets(
    spark: Any, kafka: KafkaBroker, tmp_path: Path
) -> None:
    job = Pipeline(kafka, tmp_path)
    job.produce(40)
    assert job.run(spark).status == "STOPPED"
    job.check_every_window_once()
    job.produce(30)  # the open window [30 s, 40 s) fills up, more after it
    assert job.run(spark).status == "STOPPED"
    job.check_every_window_once()


def wait_for(condition: Any, what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what} after {seconds} s"
        time.sleep(0.2)


def test_a_savepoint_at_parallelism_2_resumed_at_parallelism_1(
    spark: Any, kafka: KafkaBroker, tmp_path: Path
) -> None:
    job = Pipeline(kafka, tmp_path)
    job.produce(40)
    every_second = example.arguments(job.settings(parallelism=2, trigger="1"))
    client = example.build(every_second, spark).execute_async(
        example.JOB_NAME, trigger=example.trigger("1")
    )
    wait_for(lambda: len(job.delta_rows()) == len(fired_windows(40)), "no first windows")
    savepoint = client.stop()
    assert client.result().status == "STOPPED"
    job.check_every_window_once()
    job.produce(30)  # while the job is stopped
    resumed = job.run(spark, "--restore-from", savepoint, parallelism=1)
    assert (resumed.status, resumed.epochs) == ("STOPPED", 1)
    job.check_every_window_once()


def test_a_driver_killed_inside_the_kafka_commit_is_restarted(
    kafka: KafkaBroker, tmp_path: Path
) -> None:
    job = Pipeline(kafka, tmp_path)
    job.produce(40)
    arguments = [str(tmp_path), kafka.bootstrap, job.orders, job.totals]
    killed = subprocess.run(
        [sys.executable, str(SCRIPT), *arguments], capture_output=True, text=True, timeout=600
    )
    assert killed.returncode == 9, killed.stdout[-2000:] + killed.stderr[-3000:]
    assert job.kafka_rows() == []  # the windows are in a transaction never committed
    assert len(kafka.records(job.totals, "read_uncommitted")) == len(fired_windows(40))
    job.produce(30)
    time.sleep(1.5)  # the killed driver's lease (5 x 0.2 s) expires
    assert run_script(SCRIPT, *arguments)["status"] == "STOPPED"
    job.check_every_window_once()


class PausesOnce:
    """On the batch holding order ``order_id``, the first time: says so in ``folder``
    (``paused``) and waits there until the test writes ``go``."""

    def __init__(self, folder: Path, order_id: int) -> None:
        self.paused, self.go, self.order_id = folder / "paused", folder / "go", order_id

    def __call__(self, batch: Any) -> Any:
        if self.order_id in batch.column("id").to_pylist():
            pause_once(self.paused, self.go)
        return batch


def pause_once(paused: Path, go: Path) -> None:
    if not paused.exists():
        paused.write_text("paused\n")
        wait_for(go.exists, "the test did not say go", 300)


class PausesInsideTheCommit(TransactionalCommitter):
    """Pauses once every window of the first commit is at the broker, uncommitted."""

    folder = Path()

    def before_commit(self, context: Any, counter: Any) -> None:
        super().before_commit(context, counter)
        pause_once(self.folder / "paused", self.folder / "go")


class KafkaSinkPausingInsideTheCommit(KafkaSink):
    committer_type = PausesInsideTheCommit


def no_fault(batch: Any) -> Any:
    return batch


@pytest.mark.parametrize("where", ["in a task", "inside the Kafka commit"])
def test_a_broker_restart_mid_epoch(
    spark: Any, kafka: KafkaBroker, tmp_path: Path, where: str
) -> None:
    """The broker restarts (crashes, inside the commit) while a task of the epoch waits
    after reading its records, or while the driver's transaction holds the windows."""
    job = Pipeline(kafka, tmp_path)
    job.produce(40)
    PausesInsideTheCommit.folder = tmp_path  # the committer runs in this process
    in_a_task = where == "in a task"
    fault = PausesOnce(tmp_path, 25) if in_a_task else no_fault
    sink_type = KafkaSink if in_a_task else KafkaSinkPausingInsideTheCommit
    client = job.with_fault(spark, fault, sink_type).execute_async(
        example.JOB_NAME, trigger=AVAILABLE_NOW
    )
    wait_for((tmp_path / "paused").exists, f"the epoch did not pause {where}")
    kafka.restart(kill=not in_a_task)
    (tmp_path / "go").write_text("go\n")
    try:
        status = client.result(timeout=300).status
    except FlintlockError:  # the job may fail on the restart: a start goes on
        again = job.with_fault(spark, fault, sink_type)
        status = again.execute(example.JOB_NAME, trigger=AVAILABLE_NOW).status
    assert status == "STOPPED"
    job.check_every_window_once()


class FailsOnce:
    """Raises on the batch holding order ``order_id``, the first time (a marker file)."""

    def __init__(self, folder: Path, order_id: int) -> None:
        self.marker, self.order_id = folder / "failed", order_id

    def __call__(self, batch: Any) -> Any:
        if self.order_id in batch.column("id").to_pylist() and not self.marker.exists():
            self.marker.write_text("failed\n")
            raise RuntimeError(f"a task failure on order {self.order_id}")
        return batch


def test_a_task_failure_then_a_restart(spark: Any, kafka: KafkaBroker, tmp_path: Path) -> None:
    job = Pipeline(kafka, tmp_path)
    job.produce(40)
    assert job.run(spark).status == "STOPPED"
    job.produce(30)
    with pytest.raises(FlintlockError, match="a task failure on order 55") as failed:
        job.with_fault(spark, FailsOnce(tmp_path, 55)).execute(
            example.JOB_NAME, trigger=AVAILABLE_NOW
        )
    assert "fault" in str(failed.value)  # the operator is named
    job.check_every_window_once(read=40)  # nothing of the failed epoch is visible
    restarted = job.with_fault(spark, FailsOnce(tmp_path, 55)).execute(
        example.JOB_NAME, trigger=AVAILABLE_NOW
    )
    assert restarted.status == "STOPPED"
    job.check_every_window_once()
