"""What a job run returns (``JobExecutionResult``), made from its last checkpoint, kept in
the job result store as a document, and read back from it for a FINISHED job."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from flintlock.core.api.sink import TwoPhaseCommitSink
from flintlock.core.checkpoint.coordinator import CompletedCheckpoint
from flintlock.core.checkpoint.job_folder import JobFolder, JobRecord
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.metrics.recorder import read_run_metrics


@dataclass(repr=False)
class JobExecutionResult:
    """What a finished job returns: counts, duration, the checkpoint, collected tables."""

    job_name: str
    run_id: str
    checkpoint_id: int
    duration_seconds: float
    records_out: dict[str, int] = field(default_factory=dict)
    """Records each vertex emitted (for a sink vertex: the records its sinks received),
    summed over its subtasks."""
    vertex_seconds: dict[str, float] = field(default_factory=dict)
    """Each vertex's slowest subtask, from invoke to its snapshot."""
    collected: dict[str, pa.Table] = field(default_factory=dict)
    resumed: bool = False
    """True if this start ran nothing new: it completed the pending commit of an earlier
    run, or returned the stored result of a finished one (``already_finished``)."""
    already_finished: bool = False
    """True if the job had finished before: its stored result was returned, nothing ran."""
    status: str = "FINISHED"
    """FINISHED, or STOPPED for an unbounded job that stopped (it continues at its next
    start from its last checkpoint, ``savepoint_path`` if the stop took a savepoint)."""
    epochs: int = 1
    """Epochs this run ran (an unbounded job runs one per trigger)."""
    savepoint_path: str | None = None
    """The savepoint's own folder, if the run's last snapshot was a savepoint."""
    restarts: int = 0
    """Times the job restarted by itself in this ``execute`` (its restart strategy)."""
    restart_causes: list[str] = field(default_factory=list)
    """Each restart's cause: the failed run's error, on one line."""
    metrics: dict[str, Any] = field(default_factory=dict)
    """Flink's metrics of the run: ``epochs`` (one document each: per vertex, subtask
    and operator, and the checkpoint) and ``totals`` (records and user counts summed);
    empty with ``metrics=False``. A stored result's are read back from the job folder."""

    def __repr__(self) -> str:
        """One short line: the job, how it ended, where, and what it emitted; the tables
        and metrics only by their size (``print(result)`` must stay readable)."""
        records = ", ".join(f"{name}={n:,}" for name, n in self.records_out.items())
        tables = ", ".join(f"{name}={t.num_rows:,} rows" for name, t in self.collected.items())
        extras = [
            f"savepoint={self.savepoint_path!r}" if self.savepoint_path else "",
            "already_finished" if self.already_finished else ("resumed" if self.resumed else ""),
            f"collected={{{tables}}}" if tables else "",
            f"metrics={len(self.metrics.get('epochs', []))} epochs" if self.metrics else "",
        ]
        return (
            f"JobExecutionResult(job={self.job_name!r}, {self.status}, run={self.run_id!r}, "
            f"chk-{self.checkpoint_id}, epochs={self.epochs}, "
            f"{self.duration_seconds:.2f} s, records_out={{{records}}}"
            + "".join(f", {extra}" for extra in extras if extra)
            + ")"
        )


class JobResults:
    """A job's results: a run's result after its last checkpoint, the document the result
    store keeps of it, and a FINISHED run's result read back (owned by ``JobMaster``,
    used by the run as it ends)."""

    def __init__(
        self,
        job_name: str,
        storage: CheckpointStorage,
        folder: JobFolder,
        sinks: dict[str, TwoPhaseCommitSink[Any, Any]],
    ) -> None:
        self.job_name = job_name
        self.storage = storage
        self.folder = folder
        self.sinks = sinks

    def run_metrics(self, run_id: str) -> dict[str, Any]:
        """The metrics run ``run_id`` kept in the job's folder."""
        return read_run_metrics(self.storage, self.folder.path, run_id)

    def of(
        self,
        checkpoint: CompletedCheckpoint | None,
        started: float,
        records_out: dict[str, int] | None = None,
        resumed: bool = False,
    ) -> JobExecutionResult:
        """A run's result after ``checkpoint``; ``records_out`` (summed over an unbounded
        run's epochs) replaces the checkpoint's own counts."""
        records: dict[str, int] = {}
        seconds: dict[str, float] = {}
        for ack in checkpoint.acknowledgements if checkpoint is not None else []:
            name = ack.task_name
            records[name] = records.get(name, 0) + ack.records_out
            seconds[name] = max(seconds.get(name, 0.0), ack.duration_seconds)
        if records_out is not None:
            records = dict(records_out)
        collected = {
            name: sink_rows
            for name, sink in self.sinks.items()
            if (sink_rows := getattr(sink, "result", None)) is not None
        }
        return JobExecutionResult(
            job_name=self.job_name,
            run_id=checkpoint.run_id if checkpoint is not None else "",
            checkpoint_id=checkpoint.checkpoint_id if checkpoint is not None else 0,
            duration_seconds=time.perf_counter() - started,
            records_out=records,
            vertex_seconds=seconds,
            collected=collected,
            resumed=resumed,
            savepoint_path=(
                self.storage.uri(checkpoint.savepoint)
                if checkpoint is not None and checkpoint.savepoint is not None
                else None
            ),
        )

    def document(
        self, result: JobExecutionResult, collected_paths: dict[str, list[str]] | None = None
    ) -> dict[str, Any]:
        """The part of a result the job result store keeps (tables by their files: each
        collect sink's files of the run's epochs, else of its last commit)."""
        last = {
            name: [sink_path]
            for name, sink in self.sinks.items()
            if (sink_path := getattr(sink, "result_path", None)) is not None
        }
        return {
            "records_out": result.records_out,
            "vertex_seconds": result.vertex_seconds,
            "duration_seconds": result.duration_seconds,
            "savepoint_path": result.savepoint_path,
            "collected": collected_paths if collected_paths is not None else last,
        }

    def stored(self, record: JobRecord, started: float) -> JobExecutionResult:
        """The result a FINISHED run stored; collected tables are read back from its files."""
        stored = record.result
        collected = {}
        for name, paths in stored.get("collected", {}).items():
            tables = [self.storage.read_table(path) for path in _as_list(paths)]
            collected[name] = pa.concat_tables(tables, promote_options="permissive")
            sink = self.sinks.get(name)
            if sink is not None and hasattr(sink, "result"):
                sink.result = collected[name]
        return JobExecutionResult(
            job_name=self.job_name,
            run_id=record.run_id,
            checkpoint_id=record.checkpoint_id or 0,
            duration_seconds=time.perf_counter() - started,
            records_out=dict(stored.get("records_out", {})),
            vertex_seconds=dict(stored.get("vertex_seconds", {})),
            collected=collected,
            resumed=True,
            already_finished=True,
            savepoint_path=stored.get("savepoint_path"),
            metrics=self.run_metrics(record.run_id),
        )


def _as_list(paths: str | list[str]) -> list[str]:
    """A stored result's files: a list, or the one path results kept before."""
    return [paths] if isinstance(paths, str) else list(paths)
