"""What a person sees of a running job: a live display in a terminal (rich), polled from
Spark's status tracker while an epoch runs, or one plain line per epoch when the output
is not a terminal. Both are fed the per-epoch figures the job master hands its
``progress`` callback; nothing here runs per record or per batch.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, Any

from flintlock.core.job.control import PROGRESS_ENV, progress_line
from flintlock.core.spark.job_group import SparkProgress, running_epoch, spark_progress

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from rich.console import Console, RenderableType
    from rich.live import Live


Progress = Callable[[dict[str, Any]], None]
ProgressOption = bool | Progress | None
"""``execute(progress=...)``: True (a display), False (none), a callable given each
epoch's figures (a ``LiveProgress`` of your own console too), or None: on when stdout is
a terminal or ``flintlock run`` asks."""

POLL_SECONDS = 0.5
"""How often the live display asks Spark how the epoch goes and redraws (each frame costs
the driver CPU, which the workers share on a small machine: bench/RESULTS.md, "W1 with
progress")."""


class PlainProgress:
    """One plain line per epoch (``progress_line``) on a stream, stderr by default."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream

    def __call__(self, figures: dict[str, Any]) -> None:
        print(progress_line(figures), file=self.stream or sys.stderr, flush=True)


class ProgressState:
    """The run's figures so far: the last epoch's per vertex and the run's totals."""

    def __init__(self) -> None:
        self.last: dict[str, Any] | None = None
        self.total_in: dict[str, int] = {}
        self.total_out: dict[str, int] = {}

    def add(self, figures: dict[str, Any]) -> None:
        """Take one epoch's figures."""
        self.last = figures
        for name, count in figures.get("records_in", {}).items():
            self.total_in[name] = self.total_in.get(name, 0) + count
        for name, count in figures.get("records_out", {}).items():
            self.total_out[name] = self.total_out.get(name, 0) + count

    def vertex_rows(self) -> list[tuple[str, ...]]:
        """Per vertex: name, epoch rows in and out, rows out per second, totals, watermark."""
        last = self.last or {}
        seconds = last.get("seconds") or 0.0
        marks = last.get("watermarks") or {}
        rows: list[tuple[str, ...]] = []
        for name in self.total_out:
            out = last.get("records_out", {}).get(name, 0)
            rate = f"{out / seconds:,.0f}" if seconds > 0 else "-"
            rows.append(
                (
                    name,
                    f"{last.get('records_in', {}).get(name, 0):,}",
                    f"{out:,}",
                    rate,
                    f"{self.total_in.get(name, 0):,}",
                    f"{self.total_out[name]:,}",
                    format_watermark(marks.get(name)),
                )
            )
        return rows


def format_watermark(ms: int | None) -> str:
    """An epoch-millisecond watermark as UTC time; '-' for none."""
    if ms is None:
        return "-"
    if not -62135596800000 < ms < 253402300800000:  # Long.MIN/MAX and friends
        return "MAX" if ms > 0 else "MIN"
    seconds, millis = divmod(int(ms), 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}"


def render(
    job_name: str, state: ProgressState, running: SparkProgress | None, elapsed: float
) -> RenderableType:
    """The display's frame: a header line, the running Spark job, the vertex table."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    last = state.last
    header = Text.assemble(
        ("flintlock ", "bold"),
        (f"job '{job_name}'", "bold cyan"),
        f"  {elapsed:,.1f} s",
    )
    if last is not None:
        header.append(
            f"  epoch {last['epoch']}  chk-{last['checkpoint_id']} {last['kind']}"
            f"{' (final)' if last.get('final') else ''}  {last['seconds']:.2f} s"
            f"  state {last.get('checkpoint_bytes', 0) / 1e3:,.1f} kB"
        )
    if running is not None:
        spark = Text(
            f"Spark: epoch {running.epoch.epoch} chk-{running.epoch.checkpoint_id} running, "
            f"{running.jobs} job(s), "
            f"stages {running.stages_done}/{running.stages}, "
            f"tasks {running.tasks_done}/{running.tasks} ({running.tasks_running} running), "
            f"{running.seconds:.1f} s",
            style="yellow",
        )
    else:
        spark = Text("Spark: no epoch running" if last else "Spark: starting", style="dim")
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("vertex", "epoch in", "epoch out", "out/s", "total in", "total out"):
        table.add_column(column, justify="left" if column == "vertex" else "right")
    table.add_column("watermark", justify="right")
    for row in state.vertex_rows():
        table.add_row(*row)
    return Group(header, spark, table)


class LiveProgress:
    """A live display of one job in a terminal: a background thread polls Spark's status
    tracker for the epoch running now and redraws; each epoch's figures update the
    table, and its plain line stays above the display (the terminal keeps the history)."""

    def __init__(self, console: Console | None = None) -> None:
        from rich.console import Console

        self.console = console or Console()
        self.job_name = ""
        self.spark: SparkSession | None = None
        self.state = ProgressState()
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: Live | None = None
        self._running: SparkProgress | None = None

    def _frame(self) -> RenderableType:
        elapsed = time.monotonic() - self.started
        return render(self.job_name, self.state, self._running, elapsed)

    def start(self, job_name: str, spark: SparkSession) -> None:
        """Show ``job_name``'s run on ``spark`` until ``stop``."""
        from rich.live import Live

        self.job_name, self.spark = job_name, spark
        self.state = ProgressState()
        self._stop.clear()
        self.started = time.monotonic()
        self._live = Live(
            get_renderable=self._frame,
            console=self.console,
            auto_refresh=False,
            redirect_stdout=True,
            redirect_stderr=True,
        )
        self._live.start(refresh=True)
        self._thread = threading.Thread(target=self._poll, name="flintlock-progress", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        """Every POLL_SECONDS: the running epoch's stages and tasks, then a redraw."""
        while not self._stop.wait(POLL_SECONDS):
            epoch, spark = running_epoch(self.job_name), self.spark
            self._running = None if epoch is None or spark is None else spark_progress(spark, epoch)
            if self._live is not None:
                self._live.refresh()

    def __call__(self, figures: dict[str, Any]) -> None:
        self.state.add(figures)
        if self._live is not None:
            self._live.console.print(progress_line(figures), highlight=False)
            self._live.refresh()

    def stop(self) -> None:
        """Stop the poll thread first (it talks to Spark), then draw the last frame."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._running = None
        if self._live is not None:
            self._live.stop()
            self._live = None


def progress_for(option: ProgressOption) -> Progress | None:
    """The progress a run gets: ``option`` (see ProgressOption) or, for None, what
    FLINTLOCK_PROGRESS says (``flintlock run``: 1 on, 0 for --quiet), else a display
    when stdout is a terminal. A display is live in a terminal, else plain lines."""
    if callable(option):
        return option
    if option is None:
        wanted = os.environ.get(PROGRESS_ENV, "")
        option = wanted not in ("", "0") or (wanted == "" and _terminal())
    if not option:
        return None
    return LiveProgress() if _terminal() else PlainProgress()


@contextlib.contextmanager
def shown(option: ProgressOption, job_name: str, spark: SparkSession) -> Iterator[Progress | None]:
    """The run's progress callback; a live display is on screen inside the block."""
    progress = progress_for(option)
    if not isinstance(progress, LiveProgress):
        yield progress
        return
    progress.start(job_name, spark)
    try:
        yield progress
    finally:
        progress.stop()


def _terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced or closed stdout
        return False
