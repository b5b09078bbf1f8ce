"""Unbounded jobs whose checkpoint folder is on an object store (issue 32): a real S3
server (moto's, on loopback) holds every file of the job folder; epochs restore, a
restart resumes, the CLI reads the job by its URI, and a savepoint's URI restores a job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import unbounded_jobs
from pyspark import cloudpickle
from s3_server import BUCKET, S3Server
from unbounded_jobs import KEYS, RunningSumUntilTheEnd, committed_rows, wait_for_epochs

from flintlock import WatermarkStrategy
from flintlock.cli import main
from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.sinks.files import FileSink

pytestmark = pytest.mark.slow
cloudpickle.register_pickle_by_value(unbounded_jobs)  # workers cannot import tests/

PER_EPOCH = 300


def s3_job(
    spark: Any, checkpoint_dir: str, out: Path, options: dict[str, str] | None = None
) -> StreamExecutionEnvironment:
    """An endless sequence summed per ``id % KEYS`` into files; checkpoints at the URI,
    opened with ``options`` (the environment's storage_options) if given."""
    env = StreamExecutionEnvironment(
        parallelism=2, spark=spark, checkpoint_dir=checkpoint_dir, storage_options=options
    )
    strategy = WatermarkStrategy.for_monotonous_timestamps("event_time")
    stream = env.from_sequence(rows_per_epoch=PER_EPOCH, watermark_strategy=strategy)
    keyed = stream.key_by(lambda row: row["id"] % KEYS).process(RunningSumUntilTheEnd())
    keyed.sink_to(FileSink(str(out)), name="files")
    return env


def reference(count: int) -> dict[int, int]:
    """Plain Python over ids 0..count-1: each key's total."""
    totals: dict[int, int] = {}
    for i in range(count):
        totals[i % KEYS] = totals.get(i % KEYS, 0) + i
    return totals


def data_ids_and_totals(base: Path) -> tuple[list[int], dict[int, int]]:
    """The committed data rows' ids, sorted, and each key's last running total."""
    rows = [r for r in committed_rows(str(base)) if r["id"] >= 0]
    totals: dict[int, int] = {}
    for row in rows:
        totals[row["k"]] = max(totals.get(row["k"], 0), row["total"])
    return sorted(r["id"] for r in rows), totals


def test_an_unbounded_job_on_s3_resumes_exactly_once_and_the_cli_reads_it(
    spark: Any, s3: S3Server, s3_folder: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    checkpoint_dir = s3.uri(f"{s3_folder}/chk")
    client = s3_job(spark, checkpoint_dir, tmp_path / "out").execute_async("unbounded")
    wait_for_epochs(client, 3)  # each epoch restores the one before from S3
    client.stop()
    stopped = client.result()
    assert stopped.status == "STOPPED" and stopped.epochs >= 3
    # a URI a user passes back as it is: its scheme, without the credentials or options
    assert stopped.savepoint_path.startswith(f"s3://{BUCKET}/{s3_folder}/chk/unbounded/savepoints/")
    ids, _ = data_ids_and_totals(tmp_path)
    assert ids == list(range(PER_EPOCH * stopped.epochs))

    capsys.readouterr()
    assert main(["status", s3.uri(f"{s3_folder}/chk/unbounded")]) == 0
    status = capsys.readouterr().out
    assert status.startswith("job 'unbounded'  STOPPED") and f"run {stopped.run_id}" in status
    assert main(["checkpoints", "list", s3.uri(f"{s3_folder}/chk/unbounded")]) == 0
    listed = capsys.readouterr().out
    assert f"chk-{stopped.checkpoint_id}  unbounded  run {stopped.run_id}" in listed

    # a restart continues from the last checkpoint (the stop's savepoint), on S3
    client = s3_job(spark, checkpoint_dir, tmp_path / "out").execute_async("unbounded")
    wait_for_epochs(client, 2, after_run=stopped.run_id)
    client.stop()
    resumed = client.result()
    assert resumed.status == "STOPPED"
    ids, totals = data_ids_and_totals(tmp_path)
    count = PER_EPOCH * (stopped.epochs + resumed.epochs)
    assert ids == list(range(count))  # each row exactly once across both runs
    assert totals == reference(count)  # the restored sums went on


def test_a_savepoint_at_an_s3_uri_restores_a_new_job(
    spark: Any, s3: S3Server, s3_folder: str, tmp_path: Path
) -> None:
    options = s3.storage_options()  # plain s3:// URIs, the settings given once
    first = s3_job(spark, s3.plain_uri(f"{s3_folder}/chk"), tmp_path / "first" / "out", options)
    client = first.execute_async("first")
    wait_for_epochs(client, 2)
    savepoint = client.stop()
    stopped = client.result()
    assert savepoint.startswith(f"s3://{BUCKET}/") and stopped.savepoint_path == savepoint

    # the stop's answer restores as it is: a URI on the job's storage uses its settings
    second = s3_job(spark, s3.plain_uri(f"{s3_folder}/chk-2"), tmp_path / "second" / "out", options)
    client = second.execute_async("second", restore_from=savepoint)
    wait_for_epochs(client, 2)
    client.stop()
    resumed = client.result()
    ids, totals = data_ids_and_totals(tmp_path / "second")
    start, count = PER_EPOCH * stopped.epochs, PER_EPOCH * (stopped.epochs + resumed.epochs)
    assert ids == list(range(start, count))  # the source went on where the savepoint was
    assert totals == reference(count)  # and so did every key's sum
