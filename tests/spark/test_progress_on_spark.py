"""What a person sees of a job on Spark: each epoch's Spark job named by its job group and
description, a bounded job's one line of figures, ``flintlock run``'s line per epoch when
its output is not a terminal and nothing with --quiet, and the live display in a real
pseudo-terminal with Spark's UI on, whose REST API names the job."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import select
import socket
import struct
import subprocess
import sys
import termios
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from flintlock import EpochTrigger, StreamExecutionEnvironment
from flintlock.cli import main
from flintlock.core.job.control import progress_line
from flintlock.core.job.progress import LiveProgress
from flintlock.core.plan.execution import EPOCH_PROPERTY
from flintlock.core.spark.job_group import DESCRIPTION, GROUP, epoch_group
from flintlock.core.spark.sources import AQE

pytestmark = pytest.mark.slow

JOB = str(Path(__file__).with_name("progress_job.py"))
VERTEX = "source:sequence -> evens -> files"
FLINTLOCK = str(Path(sys.executable).with_name("flintlock"))


def test_each_epoch_runs_as_a_spark_job_named_by_job_and_epoch(spark: Any, tmp_path: Path) -> None:
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
    env.from_sequence(end=20, rows_per_epoch=10).execute_and_collect("ids")
    seen: list[dict[str, Any]] = []
    result = env.execute("named epochs", trigger=EpochTrigger.available_now(), progress=seen.append)
    assert result.epochs == 2 and [f["checkpoint_id"] for f in seen] == [1, 2]
    tracker = spark.sparkContext.statusTracker()
    groups = {n: epoch_group("named epochs", n, result.run_id) for n in (1, 2, 3)}
    jobs = {n: tracker.getJobIdsForGroup(group) for n, group in groups.items()}
    assert len(jobs[1]) >= 1 and len(jobs[2]) >= 1 and jobs[3] == []
    assert not set(jobs[1]) & set(jobs[2])
    assert all(tracker.getJobInfo(j).status == "SUCCEEDED" for j in jobs[1] + jobs[2])
    assert groups[2] == f"flintlock:named epochs:chk-2:run-{result.run_id}"
    # the driver thread's own job group is back as it was (none)
    assert spark.sparkContext.getLocalProperty(GROUP) is None

    # a new run numbers its epochs from 1 while checkpoint ids go on: Spark's description
    # of each epoch says both as the epoch's line does (seen right after it, on the thread)
    labels: list[tuple[str, str | None]] = []

    def label(figures: dict[str, Any]) -> None:
        line = progress_line(figures).split("  ")[:2]  # "epoch 1", "chk-3 checkpoint"
        labels.append((" ".join(line), spark.sparkContext.getLocalProperty(DESCRIPTION)))

    again = env.execute(
        "named epochs", new_run=True, trigger=EpochTrigger.available_now(), progress=label
    )
    run = again.run_id
    assert labels == [
        ("epoch 1 chk-3 checkpoint", f"flintlock job 'named epochs' epoch 1 chk-3 (run {run})"),
        (
            "epoch 2 chk-4 checkpoint (final)",
            f"flintlock job 'named epochs' epoch 2 chk-4 (run {run})",
        ),
    ]


def test_a_run_puts_back_the_threads_job_group_and_adaptive_setting(
    spark: Any, tmp_path: Path
) -> None:
    """The run sets them once for all its epochs (core/spark/run_settings.py) and puts
    back what the thread had: a user's own job group and AQE setting survive the job."""
    context = spark.sparkContext
    context.setJobGroup("mine", "my own work")
    spark.conf.set(AQE, "true")
    try:
        env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
        numbers = env.from_sequence(end=30, rows_per_epoch=10)
        sink = env.registry.get("sink", "collect")(name="ids", schema=numbers.schema)
        numbers.sink_to(sink, name="ids")
        result = env.execute("labels", trigger=EpochTrigger.available_now())
        assert result.epochs == 3
        assert sorted(result.collected["ids"].column("id").to_pylist()) == list(range(30))
        assert context.getLocalProperty(GROUP) == "mine"
        assert context.getLocalProperty(DESCRIPTION) == "my own work"
        # the epochs ran in the caller's group (its cancel reaches them), tagged as epochs
        tracker = context._jsc.sc().statusTracker()
        epoch_1 = list(tracker.getJobIdsForTag(f"flintlock:labels:chk-1:run-{result.run_id}"))
        assert epoch_1 and set(epoch_1) <= set(context.statusTracker().getJobIdsForGroup("mine"))
        assert context.getLocalProperty(EPOCH_PROPERTY) is None
        assert spark.conf.get(AQE) == "true"
    finally:
        context.setLocalProperty(GROUP, None)
        context.setLocalProperty(DESCRIPTION, None)
        spark.conf.unset(AQE)


def test_a_bounded_job_gives_its_one_epoch_figures(spark: Any, tmp_path: Path) -> None:
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
    rows = [{"id": i} for i in range(30)]
    env.from_collection(rows).filter(lambda r: r["id"] % 3 == 0, name="thirds").execute_and_collect(
        "out"
    )
    seen: list[dict[str, Any]] = []
    result = env.execute("bounded figures", progress=seen.append)
    assert len(seen) == 1
    figures = seen[0]
    assert (figures["epoch"], figures["final"], figures["kind"]) == (1, True, "checkpoint")
    chain = "source:collection -> thirds -> collect"  # one vertex: 30 ids in, 10 kept
    assert (figures["records_in"], figures["records_out"]) == ({chain: 30}, {chain: 10})
    tracker = spark.sparkContext.statusTracker()
    group = epoch_group("bounded figures", figures["checkpoint_id"], result.run_id)
    assert tracker.getJobIdsForGroup(group)


def slow_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Each batch takes 1.5 s: the display polls the epoch's Spark job meanwhile."""
    time.sleep(1.5)
    return batch


def test_a_bounded_job_shows_its_spark_job_stages_and_tasks_while_it_runs(
    spark: Any, tmp_path: Path
) -> None:
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
    rows = [{"id": i} for i in range(40)]
    env.from_collection(rows).map_batch(slow_batch, name="slow").execute_and_collect("out")
    display = LiveProgress(Console(file=io.StringIO(), force_terminal=True, width=160))
    env.execute("bounded display", progress=display)
    text = display.console.file.getvalue()  # type: ignore[attr-defined]
    running = re.findall(
        r"Spark: epoch 1 chk-1 running, 1 job\(s\), stages (\d)/(\d), tasks (\d+)/(\d+)", text
    )
    assert running, text[-2000:]
    stages, tasks = {int(r[1]) for r in running}, {int(r[3]) for r in running}
    assert stages == {1} and tasks == {2}  # one stage: the chained source (2 subtasks)
    assert "\x1b[1A" in text  # redrawn in place
    frames = text.split("flintlock job 'bounded display'")
    last = frames[-1]
    assert "epoch 1  chk-1 checkpoint (final)" in last and "Spark: no epoch running" in last
    assert re.search(r"source:collection -> slow -> collect +40 +40 ", last), last


def test_flintlock_run_prints_a_line_per_epoch_when_not_a_terminal(
    spark: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", JOB, str(tmp_path)]) == 0
    out, err = capfd.readouterr()
    assert out == ""
    line = re.compile(
        r"epoch (\d)  chk-(\d) checkpoint( \(final\))?  \d+\.\d\d s  records in -> out: "
        + re.escape(VERTEX)
        + r" 100 -> 50  state \d+\.\d kB"
    )
    lines = err.splitlines()
    assert len(lines) == 4, err
    matches = [line.fullmatch(text) for text in lines]
    assert all(matches), lines
    assert [(m[1], m[2], bool(m[3])) for m in matches if m] == [
        ("1", "1", False),
        ("2", "2", False),
        ("3", "3", False),
        ("4", "4", True),
    ]
    assert pq.read_table(f"{tmp_path}/out").num_rows == 200


def test_flintlock_run_quiet_prints_nothing(
    spark: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--quiet", "--spark-ui", JOB, str(tmp_path), "2"]) == 0
    assert capfd.readouterr() == ("", "")
    assert pq.read_table(f"{tmp_path}/out").num_rows == 100


def read_pty(fd: int, seconds: float) -> bytes:
    """What the terminal received within ``seconds`` (b"" once it is closed)."""
    ready, _, _ = select.select([fd], [], [], seconds)
    if not ready:
        return b""
    try:
        return os.read(fd, 65536)
    except OSError:  # EIO: the child closed the terminal
        return b""


def spark_ui_jobs(url: str) -> list[dict[str, Any]]:
    """The jobs Spark's UI lists for its one application (its REST API, loopback; its first
    answer takes seconds on a busy machine, a refused connection is tried again)."""
    for attempt in range(20):
        try:
            with urllib.request.urlopen(f"{url}/api/v1/applications", timeout=90) as answer:
                application = json.load(answer)[0]["id"]
            break
        except urllib.error.URLError:
            if attempt == 19:
                raise
            time.sleep(1.0)
    with urllib.request.urlopen(f"{url}/api/v1/applications/{application}/jobs", timeout=90) as a:
        return list(json.load(a))


def free_port() -> int:
    """A loopback port no one listens on now: Spark's UI takes it rather than 4040, which
    another Spark on this machine may hold."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


LIVE_EPOCHS = 20
"""Epochs enough that the job still runs (its UI up) after Spark's UI answered its first,
slow, request: a job that ended meanwhile had stopped the UI before the second."""


def test_flintlock_run_in_a_terminal_shows_a_live_display(tmp_path: Path) -> None:
    terminal, child_side = pty.openpty()
    fcntl.ioctl(child_side, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    process = subprocess.Popen(
        [FLINTLOCK, "run", "--spark-ui", JOB, str(tmp_path), str(LIVE_EPOCHS)],
        stdin=child_side,
        stdout=child_side,
        stderr=child_side,
        close_fds=True,
        env={
            **os.environ,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_SUBMIT_ARGS": f"--conf spark.ui.port={free_port()} pyspark-shell",
        },
    )
    os.close(child_side)
    screen, jobs, deadline = b"", None, time.monotonic() + 150
    refused: Exception | None = None
    try:
        while time.monotonic() < deadline:
            chunk = read_pty(terminal, 0.5)
            screen += chunk
            url = re.search(rb"Spark UI at (http://\S+)", screen)
            if jobs is None and refused is None and url and b"chk-2 checkpoint" in screen:
                try:
                    jobs = spark_ui_jobs(url[1].decode())  # while the job runs
                except urllib.error.URLError as error:
                    refused = error
            if not chunk and process.poll() is not None:
                break
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        os.close(terminal)
    text = screen.decode(errors="replace")
    assert process.returncode == 0, text[-3000:]
    assert "\x1b[1A" in text and "\x1b[2K" in text  # rich redraws in place: cursor up, erase
    headers = re.findall(r"  epoch (\d+) {2}chk-\d+ checkpoint", text)
    assert len(set(headers)) >= 3, headers  # successive frames showed successive epochs
    totals = re.findall(re.escape(VERTEX) + r" +100 +50 +[\d,]+ +([\d,]+) +([\d,]+) ", text)
    final = (f"{LIVE_EPOCHS * 100:,}", f"{LIVE_EPOCHS * 50:,}")
    assert final in totals and len(set(totals)) >= 3, totals  # totals in, out
    spark_lines = re.findall(r"Spark: epoch (\d) chk-(\d) running, 1 job\(s\), stages \d/\d", text)
    assert spark_lines and all(epoch == chk for epoch, chk in spark_lines)  # a first run
    assert text.count("records in -> out: ") == LIVE_EPOCHS  # each epoch's line stays above
    assert re.search(r"flintlock: Spark UI at http://\S+:\d+", text)
    assert jobs is not None, f"Spark's UI did not answer while the job ran: {refused}"
    named = {(job.get("jobGroup"), job.get("description")) for job in jobs}
    for epoch in (1, 2):
        group = re.compile(rf"flintlock:progress:chk-{epoch}:run-(\w+)")
        description = re.compile(
            rf"flintlock job 'progress' epoch {epoch} chk-{epoch} \(run (\w+)\)"
        )
        assert any(
            (g_ := group.fullmatch(str(g)))
            and (d_ := description.fullmatch(str(d)))
            and g_[1] == d_[1]
            for g, d in named
        ), named
    assert pq.read_table(f"{tmp_path}/out").num_rows == LIVE_EPOCHS * 50
