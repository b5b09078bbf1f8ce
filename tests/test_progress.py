"""The progress display without Spark: its frame rendered by rich into a terminal-mode
console, the plain line, which display a run gets, the run command's options, and the
Spark job group's names."""

from __future__ import annotations

import io
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from flintlock.cli import build_parser, run_job, set_log_level
from flintlock.core.job.control import PROGRESS_ENV
from flintlock.core.job.progress import (
    LiveProgress,
    PlainProgress,
    ProgressState,
    format_watermark,
    progress_for,
    render,
)
from flintlock.core.spark.job_group import (
    EpochJob,
    SparkProgress,
    epoch_description,
    epoch_group,
    running_epoch,
)

VERTICES = ("source:sequence -> evens", "sum -> files")


def figures(epoch: int, records: int, watermarks: dict[str, Any] | None = None) -> dict[str, Any]:
    """One epoch's figures as a JobRun hands them: each vertex gets ``records`` rows in and
    emits half of them, in 0.5 s."""
    document = {
        "epoch": epoch,
        "checkpoint_id": epoch + 10,
        "kind": "checkpoint",
        "final": epoch == 3,
        "seconds": 0.5,
        "records_in": {name: records for name in VERTICES},
        "records_out": {name: records // 2 for name in VERTICES},
        "checkpoint_bytes": 1500,
    }
    if watermarks is not None:
        document["watermarks"] = watermarks
    return document


def frame_text(state: ProgressState, running: SparkProgress | None = None) -> str:
    console = Console(file=io.StringIO(), force_terminal=True, width=150, color_system=None)
    console.print(render("orders", state, running, 12.34))
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_the_frame_shows_each_vertex_last_epoch_rates_totals_and_watermark() -> None:
    state = ProgressState()
    state.add(figures(1, 1000))
    state.add(figures(2, 3000, {VERTICES[0]: 1_700_000_000_123, VERTICES[1]: None}))
    lines = frame_text(state).splitlines()
    assert lines[0] == (
        "flintlock job 'orders'  12.3 s  epoch 2  chk-12 checkpoint  0.50 s  state 1.5 kB"
    )
    assert lines[1] == "Spark: no epoch running"
    assert lines[2].split() == [
        "vertex", "epoch", "in", "epoch", "out", "out/s", "total", "in", "total", "out",
        "watermark",
    ]  # fmt: skip
    # rows out per second: 1,500 in 0.5 s; totals over both epochs: in 4,000, out 2,000
    assert lines[3].split() == [
        *VERTICES[0].split(), "3,000", "1,500", "3,000", "4,000", "2,000",
        "2023-11-14", "22:13:20.123",
    ]  # fmt: skip
    assert lines[4].split() == [
        *VERTICES[1].split(),
        "3,000",
        "1,500",
        "3,000",
        "4,000",
        "2,000",
        "-",
    ]


def test_the_frame_shows_the_running_spark_job_of_the_epoch() -> None:
    """A run restored from chk-10: its epoch 3 completed chk-13, its epoch 4 runs chk-14."""
    job = EpochJob("orders", 4, 14, epoch_group("orders", 14, "r1"), "d", started=0.0)
    running = SparkProgress(
        job, jobs=1, stages_done=1, stages=3, tasks_done=5, tasks=8, tasks_running=2
    )
    state = ProgressState()
    state.add(figures(3, 10))
    text = frame_text(state, running)
    assert "epoch 3  chk-13 checkpoint (final)" in text
    assert "Spark: epoch 4 chk-14 running, 1 job(s), stages 1/3, tasks 5/8 (2 running)" in text
    assert frame_text(ProgressState()).splitlines()[1] == "Spark: starting"


def test_watermarks_read_as_utc_times() -> None:
    assert format_watermark(None) == "-"
    assert format_watermark(0) == "1970-01-01 00:00:00.000"
    assert format_watermark(86_400_000 + 5) == "1970-01-02 00:00:00.005"
    assert format_watermark(2**63 - 1) == "MAX"
    assert format_watermark(-(2**63)) == "MIN"


def test_the_plain_form_is_one_line_per_epoch() -> None:
    stream = io.StringIO()
    progress = PlainProgress(stream)
    progress(figures(1, 100))
    progress(figures(3, 40))
    assert stream.getvalue().splitlines() == [
        "epoch 1  chk-11 checkpoint  0.50 s  records in -> out: source:sequence -> evens "
        "100 -> 50, sum -> files 100 -> 50  state 1.5 kB",
        "epoch 3  chk-13 checkpoint (final)  0.50 s  records in -> out: source:sequence -> "
        "evens 40 -> 20, sum -> files 40 -> 20  state 1.5 kB",
    ]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("option", "env", "terminal", "expected"),
    [
        (None, None, False, type(None)),  # a library user's default: off when piped
        (None, None, True, LiveProgress),  # ... on in a terminal
        (None, "1", False, PlainProgress),  # flintlock run, piped: a line per epoch
        (None, "1", True, LiveProgress),
        (None, "0", True, type(None)),  # flintlock run --quiet
        (True, "0", False, PlainProgress),  # the program's own choice wins
        (False, "1", True, type(None)),
    ],
)
def test_which_progress_a_run_gets(
    option: bool | None,
    env: str | None,
    terminal: bool,
    expected: type,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if env is None:
        monkeypatch.delenv(PROGRESS_ENV, raising=False)
    else:
        monkeypatch.setenv(PROGRESS_ENV, env)
    monkeypatch.setattr(sys, "stdout", Terminal() if terminal else io.StringIO())
    assert type(progress_for(option)) is expected


def test_a_callable_is_the_progress_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROGRESS_ENV, "0")
    seen: list[dict[str, Any]] = []
    assert progress_for(seen.append) == seen.append


def test_spark_job_groups_name_the_job_and_epoch() -> None:
    assert epoch_group("orders", 7, "abc123") == "flintlock:orders:chk-7:run-abc123"
    description = epoch_description("orders", 2, 7, "abc123")
    assert description == "flintlock job 'orders' epoch 2 chk-7 (run abc123)"  # as its line
    assert running_epoch("orders") is None  # none outside an epoch's action


def test_run_options_quiet_log_level_spark_ui(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(["run", "-q", "--log-level", "debug", "--spark-ui", "j.py"])
    assert (args.quiet, args.log_level, args.spark_ui) == (True, "DEBUG", True)
    job = tmp_path / "job.py"
    job.write_text(
        "import os\nprint(os.environ['FLINTLOCK_PROGRESS'], os.environ.get('FLINTLOCK_SPARK_UI'))\n"
    )
    assert run_job(str(job), quiet=True, spark_ui=True) == 0
    assert run_job(str(job)) == 0
    assert capsys.readouterr().out.splitlines() == ["0 1", "1 None"]


def test_log_level_sets_flintlocks_loggers(monkeypatch: pytest.MonkeyPatch) -> None:
    logger = logging.getLogger("flintlock")
    monkeypatch.setattr(logger, "handlers", [])
    monkeypatch.setattr(logger, "level", logger.level)
    set_log_level("ERROR")
    assert logger.level == logging.ERROR and len(logger.handlers) == 1
    assert not logging.getLogger("flintlock.core.job").isEnabledFor(logging.WARNING)
    set_log_level("DEBUG")
    assert logger.level == logging.DEBUG and len(logger.handlers) == 1
