"""The function each Spark task of a stage runs (``mapInArrow``): one flintlock subtask.

The subtask's invoke runs in a greenlet; whenever its message buffer fills, control comes
back here and the batch is yielded to Spark; the task's code stays one plain function.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator

import greenlet
import pyarrow as pa

from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.errors import (
    CheckpointError,
    LifecycleError,
    TaskCanceled,
    TaskFailedOnWorker,
)
from flintlock.core.exchange.messages import Kind, encode_json
from flintlock.core.exchange.reader import MessageReader
from flintlock.core.exchange.writer import MessageWriter
from flintlock.core.hooks.manager import plugins_for
from flintlock.core.hooks.reports import reports_to_driver
from flintlock.core.plan.execution import EPOCH_PROPERTY, ExecutionPlan
from flintlock.core.plan.graph import JobVertex, Transformation
from flintlock.core.runtime.environment import TaskEnvironment
from flintlock.core.runtime.finished_task import run_finished_subtask
from flintlock.core.runtime.operator import StreamOperator, chain_position
from flintlock.core.runtime.task import StreamTask
from flintlock.core.sources.source import SourceOperator
from flintlock.core.spark.failures import task_marker_path
from flintlock.core.spark.sources import bind_partition_input
from flintlock.core.spark.task_output import captured_stdout
from flintlock.core.spark.task_plan import plan_from_property
from flintlock.core.task_info import TaskInfo


class StageFunction:
    """Runs the subtask that the current Spark partition of stage ``stage`` belongs to.

    ``partition_offset`` is where this function's partitions start in the stage (a union
    numbers partitions end to end); subtask = ``partitionId() - offset`` (SPARK_NOTES.md).
    With ``epoch_from_task``, ``plan`` is the run's template and the epoch's part comes
    from the Spark job's local property; without a ``plan`` (a stage shared between
    jobs), the property holds both (core/spark/epoch_frames.py).
    """

    def __init__(
        self,
        plan: ExecutionPlan | None,
        stage: int,
        partition_offset: int = 0,
        epoch_from_task: bool = False,
    ) -> None:
        self.plan = plan
        self.stage = stage
        self.partition_offset = partition_offset
        self.epoch_from_task = epoch_from_task

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        settle_worker_heap()  # before this task's objects

        spark_task = TaskContext.get()
        assert spark_task is not None, "a stage function runs inside a Spark task"
        if self.plan is None:
            plan = plan_from_property(spark_task.getLocalProperty(EPOCH_PROPERTY))
        elif self.epoch_from_task:
            plan = self.plan.for_epoch(spark_task.getLocalProperty(EPOCH_PROPERTY))
        else:
            plan = self.plan
        vertex, subtask = plan.locate(self.stage, spark_task.partitionId() - self.partition_offset)
        info = TaskInfo(
            task_name=vertex.name,
            task_type=vertex.task_type,
            subtask_index=subtask,
            parallelism=vertex.parallelism,
            max_parallelism=plan.max_parallelism,
            attempt_number=spark_task.attemptNumber(),
            attempt_id=spark_task.taskAttemptId(),
            epoch=plan.epoch,
            run_id=plan.run_id,
            job_name=plan.job_name,
            job_id=plan.job_id,
        )
        if plan.finished_at(vertex.name, subtask) is not None:
            yield from self._run_finished(plan, info, vertex, subtask, batches)
            return
        try:
            try:
                task, writer, reader = self._deploy(plan, info, vertex, subtask, batches)
            except Exception as error:  # before the lifecycle: plugins, operator factories
                raise _deploy_failure(info, vertex, error) from error
            _leave_marker(task.environment.storage, info)  # a LifecycleError naming the file
            yield from _run(task, writer, reader, plan)
            if reader is None:
                # A source subtask may leave its partition unread (a sequence source on
                # spark.range); PySpark reuses a worker only whose task read its input to
                # the end, and a new worker per task is slow (bench/RESULTS.md, "Epochs").
                for _ in batches:
                    pass
        except LifecycleError as error:
            # The driver sees only this text: the report rides along on one marker line.
            raise TaskFailedOnWorker(f"{error}\n{error.report.to_line()}") from None
        finally:
            bind_partition_input(None)

    def _run_finished(
        self,
        plan: ExecutionPlan,
        info: TaskInfo,
        vertex: JobVertex,
        subtask: int,
        batches: Iterator[pa.RecordBatch],
    ) -> Iterator[pa.RecordBatch]:
        """A finished subtask (of a fully finished vertex, or alone): no plugin, no
        operator, no lifecycle call."""
        writer = MessageWriter(plan, vertex, subtask)
        reader = None
        if not vertex.transformations[0].is_source:
            reader = MessageReader(plan, vertex, subtask, batches, writer)
        yield from _in_greenlet(
            lambda: run_finished_subtask(plan, vertex, info, writer, reader), writer
        )
        if reader is None:
            for _ in batches:  # read to the end, so PySpark reuses the worker (see __call__)
                pass

    def _deploy(
        self,
        plan: ExecutionPlan,
        info: TaskInfo,
        vertex: JobVertex,
        subtask: int,
        batches: Iterator[pa.RecordBatch],
    ) -> tuple[StreamTask, MessageWriter, MessageReader | None]:
        """Build the subtask: its input, output, plugins, operators and task type."""
        writer = MessageWriter(plan, vertex, subtask)
        reader = None
        if vertex.transformations[0].is_source:
            bind_partition_input(batches)
            events: Iterator = iter(())  # type: ignore[type-arg]
        else:
            reader = MessageReader(plan, vertex, subtask, batches, writer)
            events = reader.events()
        manager, registry = plugins_for(plan.plugins)
        operators = _build_operators(vertex.transformations)
        chained = dict(
            zip(
                (index for index, _ in vertex.chained_sources),
                _build_operators([t for _, t in vertex.chained_sources]),
                strict=True,
            )
        )
        for source in [*operators[:1], *chained.values()]:
            if isinstance(source, SourceOperator) and source.name in plan.source_epochs:
                source.epoch = plan.source_epochs[source.name][subtask]
        environment = TaskEnvironment(
            info=info,
            operators=operators,
            writer=writer,
            storage=CheckpointStorage.from_uri(plan.checkpoint_uri, plan.storage_options),
            plugin_manager=manager,
            input=events,
            input_channels=vertex.channels_per_input(plan.vertices),
            restore=plan.restores.get((vertex.id, subtask)),
            state_backend=plan.state_backend,
            epoch_barrier=plan.barrier,
            chained_sources=chained,
            records_in=(lambda: reader.records_in) if reader is not None else None,
            snapshot_root=plan.snapshot_root,
            metrics=plan.metrics,
        )
        task_type: type[StreamTask] = registry.get("task type", vertex.task_type)
        return task_type(environment, registry), writer, reader


def _build_operators(transformations: list[Transformation]) -> list[StreamOperator]:
    """Fresh operators for one subtask; a failing factory is named on its error."""
    operators = []
    for transformation in transformations:
        try:
            operators.append(transformation.make_operator())
        except Exception as error:
            error.flintlock_operator = transformation.name  # type: ignore[attr-defined]
            raise
    return operators


def _deploy_failure(info: TaskInfo, vertex: JobVertex, error: Exception) -> LifecycleError:
    """The error of a subtask that could not be built, naming the operator if its
    factory raised."""
    operator = getattr(error, "flintlock_operator", None)
    if operator is None:
        return LifecycleError(info, "deploy", error)
    names = [t.name for t in vertex.all_transformations]
    position = f"not built, {chain_position(names.index(operator), len(names))}"
    return LifecycleError(info, "deploy", error, operator, "its factory", position)


def _leave_marker(storage: CheckpointStorage, info: TaskInfo) -> None:
    """Note which subtask this Spark task runs: if its worker dies, the driver names it.
    The task's first write to checkpoint storage: a failure is flintlock's own write,
    named with its file (an executor without the storage's credentials fails here)."""
    path = task_marker_path(storage, info.job_name, info.run_id, info.epoch, info.attempt_id)
    document = {
        "task_name": info.task_name,
        "subtask_index": info.subtask_index,
        "parallelism": info.parallelism,
        "attempt_number": info.attempt_number,
    }
    try:
        storage.write_json(path, document)
    except OSError as error:
        unreachable = CheckpointError(
            f"flintlock's own write of {path} to the job's checkpoint storage failed on this "
            f"executor: {error}. The executors must reach the checkpoint storage as the "
            f"driver does (credentials, endpoint, permissions)"
        )
        raise LifecycleError(info, "deploy", unreachable) from error


def _run(
    task: StreamTask, writer: MessageWriter, reader: MessageReader | None, plan: ExecutionPlan
) -> Iterator[pa.RecordBatch]:
    def body() -> None:
        with captured_stdout():  # print() in user functions, for the driver in local mode
            task.invoke()
        if reader is not None:
            reader.drain()
        for report in reports_to_driver(task.environment.plugin_manager, plan.plugins, task.info):
            writer.send_towards_driver(Kind.REPORT, encode_json(report.to_json()))

    return _in_greenlet(body, writer)


def _in_greenlet(body: Callable[[], None], writer: MessageWriter) -> Iterator[pa.RecordBatch]:
    """Run ``body`` in a greenlet, yielding the writer's buffers to Spark as they fill."""
    parent = greenlet.getcurrent()
    writer.flush = parent.switch
    runner = greenlet.greenlet(body)
    try:
        out = runner.switch()
        while not runner.dead:
            yield out
            out = runner.switch()
    except GeneratorExit:  # Spark stopped reading: the task is canceled
        if not runner.dead:
            try:
                runner.throw(TaskCanceled("the Spark task was stopped"))
            except LifecycleError as error:
                if not error.canceled:
                    raise
        raise
    writer.frame_pending()
    if len(writer.buffer):
        yield writer.buffer.take()


_frozen = False

TASK_GC_THRESHOLDS = (100_000, 50, 100)
"""CPython's collection thresholds in a worker (its defaults: 700, 10, 10). Keyed state is
Python objects by the million; at the defaults the collector walked them again and again
while a task made more (30% of Nexmark q17's keyed operator, 64% of its snapshot:
bench/RESULTS.md, "Nexmark: the engine after the 10,000,000-event pass"). Garbage cycles
are still freed: the young generations are collected every 100,000 allocations, and
PySpark's daemon runs a full ``gc.collect()`` after each task."""


def settle_worker_heap() -> None:
    """Once per worker process: collect, then freeze what is alive (``gc.freeze``), and
    raise the collection thresholds (``TASK_GC_THRESHOLDS``).

    A reused PySpark worker runs a full ``gc.collect()`` after each task (``daemon.py``);
    with pyarrow, PySpark and flintlock imported that scans a few hundred thousand
    objects per task, on cores shared with the JVM feeding the next task
    (bench/RESULTS.md, "The 1,000-row job with shared stages and a frozen worker heap").
    Frozen, the modules and their functions (alive as long as the process) are no longer
    scanned. Frozen objects are still freed when their count of references drops to
    zero; only cycles among them, which the first task's own objects alone could form,
    are never collected."""
    global _frozen
    if _frozen:
        return
    gc.collect()
    gc.freeze()
    gc.set_threshold(*TASK_GC_THRESHOLDS)
    _frozen = True
