"""One job run's epochs on the driver: where the run starts, each epoch's plan, one epoch
run and committed, what the next epoch restores, and how the run ends (FINISHED or
STOPPED, its result and status).

Two drivers of epochs share it: ``EpochLoop`` (unbounded sources, epochs as the trigger
says) and ``StreamingEpochs`` (a streaming DataFrame's micro-batches are the epochs).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from flintlock.core.api.triggers import EpochTrigger
from flintlock.core.checkpoint.coordinator import CompletedCheckpoint
from flintlock.core.checkpoint.finished_subtasks import finished_subtasks
from flintlock.core.checkpoint.reader import load_checkpoint
from flintlock.core.checkpoint.restore import (
    RestoreSource,
    operator_uids,
    plan_restores,
    prepare_restore,
)
from flintlock.core.checkpoint.savepoints import free_savepoint_root, new_savepoint_root
from flintlock.core.checkpoint.snapshots import TaskRestore
from flintlock.core.errors import GraphError
from flintlock.core.events import CheckpointBarrier
from flintlock.core.job import signals as job_signals
from flintlock.core.job.control import SIGNAL, ControlRequest, JobControl
from flintlock.core.job.run_graph import run_graph
from flintlock.core.job.run_log import RunLog
from flintlock.core.metrics.aggregate import watermarks
from flintlock.core.plan.execution import ExecutionPlan
from flintlock.core.plan.graph import JobGraph
from flintlock.core.sources.epochs import EpochSplits, UnboundedSource
from flintlock.core.sources.source import SourceOperator
from flintlock.core.spark.streaming_source import StreamingDataFrameSource

if TYPE_CHECKING:
    from flintlock.core.job.master import JobMaster
    from flintlock.core.job.result import JobExecutionResult

Progress = Callable[[dict[str, Any]], None]
"""Called on the driver after every epoch with its figures (the CLI prints a line)."""
EPOCH_KEYS = ("epoch", "checkpoint_id", "kind", "final", "seconds", "time")
"""The epoch's figures its metrics document starts with."""


class EpochRun:
    """The epochs of one job run: the steps both epoch drivers take, each once per epoch
    or once per run; the drivers decide when."""

    def __init__(
        self, master: JobMaster, trigger: EpochTrigger, progress: Progress | None = None
    ) -> None:
        self.master = master
        self.trigger = trigger
        self.progress = progress
        self.control = JobControl(master.folder)
        self.graph_transformations, self.graph = run_graph(master)
        self.run_log = RunLog(master.folder, self.graph)
        self.uids = operator_uids(master.transformations)
        self.sources, self.streaming = unbounded_sources(master.transformations, self.graph)
        self.epochs: list[dict[str, Any]] = []
        self.records_out: dict[str, int] = {}
        self.collected: dict[str, list[pa.Table]] = {}
        """Each collect sink's committed rows, epoch by epoch, for the run's result."""

    def next_request(self, run_id: str) -> ControlRequest | None:
        """A stop asked for by a signal to the driver (Ctrl-C), else the oldest request
        sent to this run."""
        job_signals.check_canceled()
        if job_signals.stop_requested():
            return ControlRequest(SIGNAL, "stop", run_id=run_id)
        return self.control.next_request(run_id)

    def starting_point(
        self, latest: CompletedCheckpoint | None, new_run: bool, run_id: str
    ) -> tuple[RestoreSource | None, dict[str, Any], int]:
        """What the first epoch restores, the sources' states, and its checkpoint id."""
        master = self.master
        self.run_log.record_run(run_id)
        next_id = master.next_checkpoint_id(latest)
        restore = master.config.restore
        if restore is not None:
            master.check_restore_storage(restore)
            return (
                restore,
                dict(restore.checkpoint.sources),
                max(next_id, restore.checkpoint_id + 1),
            )
        if latest is not None and not new_run and not latest.final:
            # continue the job: after a crash, a stop, or an available-now run
            master.coordinator.commit(latest, master.sinks)  # idempotent
            master.abort_uncommitted(run_id, latest.committables)
            path = f"{master.folder.checkpoints}/chk-{latest.checkpoint_id}"
            restore = prepare_restore(
                path, self.uids, master.config.max_parallelism, storage=master.storage
            )
            return restore, dict(latest.sources), next_id
        context = master.coordinator.commit_context(run_id, next_id)
        for name, sink in master.sinks.items():  # a new run: the output modes decide
            sink.prepare_output(context.for_sink(name))
        pending = latest is not None and not latest.final and not latest.committed
        master.abort_uncommitted(run_id, latest.committables if pending and latest else {})
        return None, {}, next_id

    def plan(
        self,
        run_id: str,
        barrier: CheckpointBarrier,
        restores: dict[tuple[int, int], TaskRestore],
        aborted: list[int],
        planned: dict[str, EpochSplits],
        ends: bool | dict[str, bool],
        snapshot_root: str | None = None,
    ) -> ExecutionPlan:
        """The execution plan of one epoch; ``ends``: whether the input ends, for every
        source or per source uid (each source ends its own input, FLIP-147); a savepoint's
        tasks write to ``snapshot_root``."""
        master = self.master
        if aborted:
            restores = {key: replace(r, aborted=list(aborted)) for key, r in restores.items()}
        names = [*self.sources, *([self.streaming.name] if self.streaming is not None else [])]
        source_epochs = {
            name: planned[self.uids[name]].source_epochs(
                ends if isinstance(ends, bool) else ends[self.uids[name]]
            )
            for name in names
        }
        return ExecutionPlan(
            job_name=master.config.job_name,
            run_id=run_id,
            epoch=barrier.checkpoint_id,
            barrier=barrier,
            checkpoint_uri=master.config.checkpoint_uri,
            max_parallelism=master.config.max_parallelism,
            state_backend=master.config.state_backend,
            graph=self.graph,
            plugins=master.config.plugins,
            job_id=master.folder.job_id,
            restores=restores,
            source_epochs=source_epochs,
            snapshot_root=snapshot_root,
            finished_subtasks=finished_subtasks(self.graph, restores),
            metrics=master.config.metrics,
        )

    def checkpoint_epoch(
        self, plan: ExecutionPlan, planned: dict[str, EpochSplits]
    ) -> CompletedCheckpoint:
        """The epoch's Spark job and its checkpoint, with the sources' states: the part a
        failed savepoint may undo (nothing of it was published)."""
        master = self.master
        details = master.checkpoint_details(self.graph)
        details["sources"] = {uid: p.state for uid, p in planned.items()}
        epoch = len(self.epochs) + 1  # the number its figures will carry
        return master.run_epoch(plan, final=plan.barrier.final, details=details, epoch=epoch)

    def commit_epoch(
        self, plan: ExecutionPlan, checkpoint: CompletedCheckpoint, epoch_started: float
    ) -> None:
        """Once the checkpoint completed: the commit (a failure fails the job, never only
        a request: the next start completes it), cleanup, retention, the figures."""
        master = self.master
        master.coordinator.commit(checkpoint, master.sinks)
        # what dead attempts of this epoch staged (a worker killed mid-epoch) goes now
        master.abort_uncommitted(plan.run_id, checkpoint.committables)
        master.coordinator.retain(master.config.retained_checkpoints)
        for name, sink in master.sinks.items():  # a collect sink holds this epoch's rows
            table = getattr(sink, "result", None)
            if table is not None:
                self.collected.setdefault(name, []).append(table)
        self._record_epoch(plan, checkpoint, epoch_started)

    def _record_epoch(
        self, plan: ExecutionPlan, checkpoint: CompletedCheckpoint, epoch_started: float
    ) -> None:
        """The epoch's figures: the status file, the progress callback, the run's totals."""
        records: dict[str, int] = {}
        records_in: dict[str, int] = {}
        size = 0
        for ack in checkpoint.acknowledgements:
            name = ack["task_name"]
            records[name] = records.get(name, 0) + ack["records_out"]
            records_in[name] = records_in.get(name, 0) + ack.get("records_in", 0)
            size += ack.get("size_bytes", 0)
        for name, count in records.items():
            self.records_out[name] = self.records_out.get(name, 0) + count
        figures = {
            "epoch": len(self.epochs) + 1,
            "checkpoint_id": checkpoint.checkpoint_id,
            "kind": plan.barrier.kind,
            "final": plan.barrier.final,
            "seconds": round(time.monotonic() - epoch_started, 4),
            "records_in": records_in,
            "records_out": records,
            "checkpoint_bytes": size,
            "time": time.time(),
        }
        metrics = self.master.metrics.record(
            checkpoint.acknowledgements, {k: figures[k] for k in EPOCH_KEYS}
        )
        figures["watermarks"] = watermarks(metrics) if metrics else dict.fromkeys(records)
        self.epochs.append(figures)
        self.run_log.record_epoch(plan, checkpoint, figures)
        self._write_status("RUNNING", plan.run_id, checkpoint.checkpoint_id)
        if self.progress is not None:
            self.progress(figures)

    def _write_status(self, status: str, run_id: str, checkpoint_id: int, **extra: Any) -> None:
        """The run's status file (``flintlock status``): status, trigger, epochs so far."""
        folder = self.master.folder
        self.control.write_status(
            {
                "job_name": folder.job_name,
                "job_id": folder.job_id,
                "run_id": run_id,
                "status": status,
                "trigger": {"kind": self.trigger.kind, "seconds": self.trigger.interval_seconds},
                "latest_checkpoint": checkpoint_id,
                "epochs": self.epochs,
                **extra,
            }
        )

    def restores_after(self, checkpoint: CompletedCheckpoint) -> dict[tuple[int, int], TaskRestore]:
        """What the next epoch restores: the checkpoint this one just completed (read
        through the job's storage: its paths have no scheme, whatever the file system)."""
        path = f"{self.master.folder.checkpoints}/chk-{checkpoint.checkpoint_id}"
        stored = load_checkpoint(path, self.master.storage)
        names = {name: name for name in stored.operators()}
        return plan_restores(RestoreSource(stored, names, []), self.graph)

    def savepoint_root(self, checkpoint_id: int) -> str:
        """A new self-contained folder for the savepoint taken as ``checkpoint_id``: under
        the job's ``savepoint_dir``, by default ``<job folder>/savepoints``."""
        master = self.master
        if master.config.savepoint_dir:
            return new_savepoint_root(master.storage, master.config.savepoint_dir, checkpoint_id)
        default = f"{master.folder.path}/savepoints"  # a path on the job's file system
        return free_savepoint_root(master.storage, default, checkpoint_id)

    # ---- how a run ends ----

    def ended(
        self,
        checkpoint: CompletedCheckpoint,
        run_id: str,
        started: float,
        savepoint: str | None,
        input_ended: bool,
    ) -> JobExecutionResult:
        """The input ended (FINISHED) or a stop took a savepoint (STOPPED).

        A stop with drain ends the input, so it is FINISHED too (its savepoint kept), as
        Flink reports it: its stop-with-savepoint, drained or not, succeeds only once every
        task reached FINISHED, and the job then ends FINISHED (apache/flink,
        flink-runtime/.../stopwithsavepoint/StopWithSavepointTerminationHandlerImpl.java,
        ``handleExecutionsTermination``). A stop without drain stays STOPPED here: its
        next start continues the job, where Flink would need a new submission."""
        if input_ended:
            result = self.master.result_of(checkpoint, started, self.records_out)
            result.savepoint_path = savepoint
            self.master.folder.record_finished(
                run_id, checkpoint.checkpoint_id, self.master.result_document(result)
            )
            self._write_status("FINISHED", run_id, checkpoint.checkpoint_id, savepoint=savepoint)
            final = savepoint or f"{self.master.folder.checkpoints}/chk-{checkpoint.checkpoint_id}"
            self.control.answer_remaining(
                run_id, savepoint=final, checkpoint_id=checkpoint.checkpoint_id, final=True
            )
            return self._finish_result(result, "FINISHED")
        return self.stopped(checkpoint, run_id, started, savepoint)

    def stopped(
        self,
        checkpoint: CompletedCheckpoint | None,
        run_id: str,
        started: float,
        savepoint: str | None,
    ) -> JobExecutionResult:
        """STOPPED: the next start continues from ``checkpoint`` (the savepoint, if any)."""
        master = self.master
        checkpoint_id = checkpoint.checkpoint_id if checkpoint is not None else 0
        result = master.result_of(checkpoint, started, self.records_out)
        master.folder.record_stopped(
            run_id, checkpoint_id, savepoint, master.result_document(result)
        )
        self._write_status("STOPPED", run_id, checkpoint_id, savepoint=savepoint)
        stopped_at = savepoint or f"{master.folder.checkpoints}/chk-{checkpoint_id}"
        self.control.answer_remaining(run_id, savepoint=stopped_at, checkpoint_id=checkpoint_id)
        result.savepoint_path = savepoint
        return self._finish_result(result, "STOPPED")

    def _finish_result(self, result: JobExecutionResult, status: str) -> JobExecutionResult:
        """The run's figures: status, epochs, and every epoch's collected rows."""
        result.status = status
        result.epochs = len(self.epochs)
        result.metrics = self.master.metrics.summary()
        result.collected = {
            name: pa.concat_tables(tables, promote_options="permissive")
            for name, tables in self.collected.items()
        }
        return result


def unbounded_sources(
    transformations: list[Any], graph: JobGraph
) -> tuple[dict[str, tuple[UnboundedSource, int]], Any]:
    """Source operator name -> (its unbounded source, its parallelism), and the
    transformation of a streaming DataFrame source (or None). A job that mixes bounded
    and unbounded sources, or a streaming DataFrame with other sources, is refused."""
    parallelism = {
        t.name: v.parallelism for v in graph.vertices.values() for t in v.transformations
    }
    found: dict[str, tuple[UnboundedSource, int]] = {}
    streaming = []
    bounded = []
    for t in transformations:
        if not t.is_source:
            continue
        operator = t.make_operator()
        source = operator.source if isinstance(operator, SourceOperator) else None
        if isinstance(source, UnboundedSource):
            found[t.name] = (source, parallelism[t.name])
        elif isinstance(source, StreamingDataFrameSource):
            streaming.append(t)
        else:
            bounded.append(t.name)
    if (found or streaming) and bounded:
        unbounded = sorted([*found, *(t.name for t in streaming)])
        raise GraphError(
            f"the job reads bounded source(s) {bounded} beside unbounded {unbounded}: "
            f"mixing them is not supported yet"
        )
    if streaming and (found or len(streaming) > 1):
        names = sorted([*found, *(t.name for t in streaming)])
        raise GraphError(
            f"a job with a streaming DataFrame source reads nothing else (its micro-batches "
            f"are the epochs); this one reads {names}"
        )
    return found, (streaming[0] if streaming else None)
