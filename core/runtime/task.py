"""StreamTask: one subtask's invoke sequence, exactly as ARCHITECTURE.md section 3 lists it.

Task types (plugins) subclass it and supply ``task_init``, ``run``, ``await_barrier``
and ``task_cleanup``; everything else is the same for every task type.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

from flintlock.core.checkpoint.snapshots import (
    MANIFEST,
    OperatorSnapshot,
    TaskAcknowledgement,
    TaskSnapshot,
)
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.errors import LifecycleError, TaskCanceled, operator_tag
from flintlock.core.events import CheckpointBarrier
from flintlock.core.exchange.key_groups import key_group_range
from flintlock.core.hooks.registry import Registry, build_registry
from flintlock.core.hooks.runner import HookRunner
from flintlock.core.hooks.specs import TaskPhase
from flintlock.core.metrics.subtask import IdleClock, operator_metrics, state_sizes, subtask_metrics
from flintlock.core.runtime.chain import OperatorChain
from flintlock.core.runtime.environment import TaskEnvironment
from flintlock.core.runtime.execution_state import ExecutionState, check_transition
from flintlock.core.runtime.mailbox import TaskMailbox
from flintlock.core.runtime.operator import StreamOperator
from flintlock.core.runtime.processing_time import ProcessingTimeService
from flintlock.core.state.backend import StateBackend
from flintlock.core.task_info import TaskInfo


class StreamTask:
    """Runs one subtask of a vertex: its chain's whole lifecycle, once per epoch."""

    task_type: ClassVar[str] = "?"
    head_operator_type: ClassVar[type] = StreamOperator

    def __init__(self, environment: TaskEnvironment, registry: Registry | None = None) -> None:
        self.environment = environment
        self.info = environment.info
        self.hooks = HookRunner(environment.plugin_manager)
        self.registry = registry or build_registry(environment.plugin_manager)
        self.state = ExecutionState.CREATED
        self.phase: TaskPhase | str = "created"
        self.chain: OperatorChain
        self.state_backend: StateBackend
        self.input_ended = False
        self.barrier: CheckpointBarrier | None = None
        self.snapshot: TaskSnapshot | None = None
        self.acknowledgement: TaskAcknowledgement | None = None
        self.mailbox = TaskMailbox()
        self.processing_time = ProcessingTimeService(environment.clock, self.mailbox)
        self.lifecycle_phases: dict[str, list[float]] = {}
        """Phase -> [start, end] in wall-clock seconds, for the run report's Gantt chart."""
        self.idle = IdleClock()
        if environment.metrics:  # the time spent waiting for input is idle, not busy
            environment.input = self.idle.timed(environment.input)

    def invoke(self) -> TaskAcknowledgement | None:
        """Run the subtask to its end; raises LifecycleError on failure or cancel."""
        failure: BaseException | None = None
        self.started = time.perf_counter()
        try:
            self.transition(ExecutionState.DEPLOYING)
            self.step("set_initial_state", self.set_initial_state)
            self.step("load_chain", self.load_operator_chain)
            self.transition(ExecutionState.INITIALIZING)
            self.step("setup", self.setup_operators)  # first to last
            self.step("task_init", self.task_init)  # the task type's part
            self.step("initialize_state", self.initialize_operator_states)
            self.step("open", self.chain.open_operators)  # LAST to first
            self.transition(ExecutionState.RUNNING)
            self.step("notify_restored", self.notify_restored_checkpoints)
            self.step("run", self.run)  # until the input or the epoch ends
            if self.input_ended:
                self.step("finish", self.finish_operators)  # FIRST to last
            self.step("snapshot", self.snapshot_and_acknowledge)  # the epoch's checkpoint
        except BaseException as error:
            failure = error
        failure_phase = self.phase
        closing_errors = self.close_and_clean_up(failure)
        if failure is None and closing_errors:
            # an operator's close, or the task's own step (task_cleanup, ...) that raised
            label, failure = closing_errors[0]
            failure_phase = self.cleanup_phases.get(label, "close")
            closing_errors = closing_errors[1:]
        self.finish_state(failure)
        if failure is not None:
            raise self.describe_failure(failure, failure_phase, closing_errors) from failure
        self.report_lifecycle_phases()
        return self.acknowledgement

    # ---- the steps every task type shares ----

    def step(self, phase: TaskPhase, action: Callable[[], object]) -> None:
        """Run one phase of invoke inside its ``flintlock_task_invoke_phase`` hook; its
        start and end (wall clock, once per phase) go into ``lifecycle_phases``."""
        self.phase = phase
        started = time.time()
        try:
            self.hooks.around("flintlock_task_invoke_phase", action, task=self.info, phase=phase)
        finally:
            self.lifecycle_phases[phase] = [round(started, 6), round(time.time(), 6)]

    def transition(self, new_state: ExecutionState) -> None:
        """Move to ``new_state`` and tell the plugins."""
        previous = self.state
        check_transition(previous, new_state)
        self.state = new_state
        self.hooks.notify(
            "flintlock_task_state_changed", task=self.info, previous=previous, current=new_state
        )

    def set_initial_state(self) -> None:
        """Pick the state backend; the restore (if any) is read per operator later."""
        backend_type = self.registry.get("state backend", self.environment.state_backend)
        self.state_backend = backend_type()
        # state TTL reads processing time: the task's clock unless a TTL clock is given
        self.state_backend.ttl_clock = self.environment.ttl_clock or self.environment.clock

    def load_operator_chain(self) -> None:
        """Wire the operators into a chain; the head must fit this task type."""
        operators = self.environment.operators
        if operators and not isinstance(operators[0], self.head_operator_type):
            raise TypeError(
                f"a {self.task_type} task needs a {self.head_operator_type.__name__} at the "
                f"head of its chain, got {type(operators[0]).__name__} '{operators[0].name}'"
            )
        self.chain = OperatorChain(
            operators,
            self.environment.writer,
            self.hooks,
            self.info,
            self.processing_time,
            self.mailbox,
            sources=self.environment.chained_sources,
        )

    def setup_operators(self) -> None:
        """Set every operator up, first to last, with the task's checkpoint storage."""
        self.chain.setup_operators(self.environment.storage)

    def initialize_operator_states(self) -> None:
        """Create and restore every operator's state, first to last."""
        env = self.environment
        self.chain.initialize_states(self.state_backend, env.storage, env.restore)

    def notify_restored_checkpoints(self) -> None:
        """After a restore: complete(N) for the restored N, then aborted(M) for each M > N."""
        restore = self.environment.restore
        if restore is None:
            return
        self.chain.notify_checkpoint_complete(restore.checkpoint_id)
        for checkpoint_id in sorted(set(restore.aborted)):
            self.chain.notify_checkpoint_aborted(checkpoint_id)

    def finish_operators(self) -> None:
        """end_input/finish down the chain, then tell downstream the output ended."""
        self.chain.finish_operators()
        self.environment.writer.end_of_input()

    def snapshot_and_acknowledge(self) -> None:
        """Take the epoch's snapshot (after the barrier), write it, acknowledge it."""
        barrier = self.barrier or self.await_barrier()
        self.barrier = barrier
        snapshot_started = time.perf_counter()
        env, info = self.environment, self.info
        directory = env.storage.task_snapshot_dir(info, barrier.checkpoint_id, env.snapshot_root)
        self.mailbox.run_pending()  # what a waiting mail changes belongs in this checkpoint
        with env.storage.writes_side_by_side():  # all written before the acknowledgement
            operators = self.chain.snapshot_states(barrier.checkpoint_id, env.storage, directory)
            snapshot, manifest, size = write_manifest(
                env.storage,
                info,
                barrier,
                directory,
                final=barrier.final and self.input_ended,
                operators=operators,
                ended_inputs=self.ended_input_indices(),
                finished_at=barrier.checkpoint_id if self.input_ended else None,
            )
        self.snapshot = snapshot
        records_in = self.records_in()
        records_out = getattr(env.writer, "records_out", 0) + sum(
            getattr(op, "records_written", 0) for op in self.chain.head_to_tail()
        )
        self.acknowledgement = TaskAcknowledgement(
            checkpoint_id=barrier.checkpoint_id,
            task_name=info.task_name,
            subtask_index=info.subtask_index,
            attempt_id=info.attempt_id,
            manifest_path=manifest,
            size_bytes=size,
            manifest=snapshot.to_json(),
            finished=self.input_ended,
            committables={
                op.name: found
                for op in self.chain.head_to_tail()
                if (found := op.committables()) is not None
            },
            records_in=records_in,
            records_out=records_out,
            duration_seconds=time.perf_counter() - self.started,
            finished_at=snapshot.finished_at,
            metrics=self.epoch_metrics(operators, records_in, records_out, snapshot_started, size)
            if env.metrics
            else {},
        )
        env.writer.acknowledge(self.acknowledgement)

    def report_lifecycle_phases(self) -> None:
        """After a clean close: every phase's times (close and cleanup included) in a last
        message towards the driver, which adds them to this subtask's acknowledgement
        (ARCHITECTURE.md: acknowledge, then close; the times of close come after it)."""
        if self.acknowledgement is not None:
            phases = {name: list(times) for name, times in self.lifecycle_phases.items()}
            self.environment.writer.report_phases(self.info, phases)

    def epoch_metrics(
        self,
        snapshots: dict[str, OperatorSnapshot],
        records_in: int,
        records_out: int,
        snapshot_started: float,
        manifest_bytes: int,
    ) -> dict[str, Any]:
        """The subtask's metrics of this epoch (Flink's names), read once, at its snapshot."""
        state_bytes = state_sizes(self.environment.storage, snapshots)
        chained = [output.rows for output in self.chain.outputs[:-1]]  # type: ignore[attr-defined]
        now = time.perf_counter()
        return subtask_metrics(
            records_in=records_in,
            records_out=records_out,
            duration_seconds=now - self.started,
            idle_seconds=self.idle.idle_seconds,
            checkpoint_seconds=now - snapshot_started,
            checkpoint_bytes=sum(state_bytes.values()) + manifest_bytes,
            operators={
                **{  # sources chained into the head: what each read went into the head
                    source.name: operator_metrics([source], read, [], read, state_bytes)[
                        source.name
                    ]
                    for source in self.chain.sources.values()
                    for read in [int(getattr(source, "records_read", 0))]
                },
                **operator_metrics(
                    self.chain.head_to_tail(),
                    records_in,
                    chained,
                    getattr(self.environment.writer, "records_out", 0),
                    state_bytes,
                ),
            },
        )

    def records_in(self) -> int:
        """Records the subtask read: from its input channels, or its source head's reads."""
        env = self.environment
        return env.records_in() if env.records_in is not None else self.source_records()

    def source_records(self) -> int:
        """Records a source subtask's head read (0 for a head that counts none)."""
        return int(getattr(self.chain.head, "records_read", 0)) if self.chain.operators else 0

    def close_and_clean_up(self, failure: BaseException | None) -> list[tuple[str, BaseException]]:
        """Close and clean up in the documented order; returns errors raised on the way.

        Success: close operators, timer shutdown, task cleanup, common cleanup.
        Failure or cancel: timer shutdown, task cleanup, close operators, common cleanup.
        """
        errors: list[tuple[str, BaseException]] = []
        chain = getattr(self, "chain", None)
        close: list[tuple[TaskPhase, Callable[[], object]]] = []
        if chain is not None:
            close = [("close", lambda: errors.extend(chain.close_operators()))]
        self.mailbox.close()  # no mail runs in or after close
        timer_shutdown: list[tuple[TaskPhase, Callable[[], object]]] = [
            ("timer_shutdown", chain.quiesce_timers if chain else lambda: None),
            ("task_cleanup", self.task_cleanup),
        ]
        steps = close + timer_shutdown if failure is None else timer_shutdown + close
        steps.append(("common_cleanup", self.common_cleanup))
        self.cleanup_phases: dict[str, str] = {}
        for phase, action in steps:
            try:
                self.step(phase, action)
            except BaseException as error:
                errors.append((f"task {phase}", error))
                self.cleanup_phases[f"task {phase}"] = phase
        return errors

    def common_cleanup(self) -> None:
        """Release what every task type holds: the operators' state backends."""
        chain = getattr(self, "chain", None)
        if chain is not None:
            chain.dispose_state()

    def finish_state(self, failure: BaseException | None) -> None:
        """FINISHED, CANCELED or FAILED, after every cleanup step."""
        if failure is None:
            self.transition(ExecutionState.FINISHED)
        elif isinstance(failure, TaskCanceled):
            self.transition(ExecutionState.CANCELED)
        else:
            self.transition(ExecutionState.FAILED)

    def describe_failure(
        self,
        failure: BaseException,
        phase: str,
        closing_errors: list[tuple[str, BaseException]],
    ) -> LifecycleError:
        """The error the task raises: task, subtask, operator, phase; cause chained."""
        tag = operator_tag(failure)
        chain = getattr(self, "chain", None)
        position = chain.position_of(tag[0]) if tag and chain is not None else None
        return LifecycleError(
            self.info,
            phase=phase,
            cause=failure,
            operator=tag[0] if tag else None,
            operator_method=tag[1] if tag else None,
            operator_position=position,
            closing_errors=closing_errors,
        )

    # ---- what a task type supplies ----

    def task_init(self) -> None:
        """Task-specific init: input channels or source readers."""

    def run(self) -> None:
        """Process input until it ends (set ``input_ended``) or a barrier ends the epoch."""
        raise NotImplementedError

    def await_barrier(self) -> CheckpointBarrier:
        """After the input ended: wait for the barrier of the final checkpoint."""
        raise NotImplementedError

    def task_cleanup(self) -> None:
        """Task-specific cleanup: release input channels or source readers."""

    def ended_input_indices(self) -> list[int]:
        """The inputs whose end_input was called, in this epoch or before (snapshotted)."""
        return []


def write_manifest(
    storage: CheckpointStorage,
    info: TaskInfo,
    barrier: CheckpointBarrier,
    directory: str,
    *,
    final: bool,
    operators: dict[str, Any],
    ended_inputs: list[int],
    finished_at: int | None,
) -> tuple[TaskSnapshot, str, int]:
    """Write one subtask's manifest of ``barrier``'s checkpoint in ``directory``: the
    snapshot, the manifest's path and its size in bytes."""
    snapshot = TaskSnapshot(
        checkpoint_id=barrier.checkpoint_id,
        kind=barrier.kind,
        final=final,
        task_name=info.task_name,
        subtask_index=info.subtask_index,
        parallelism=info.parallelism,
        max_parallelism=info.max_parallelism,
        directory=directory,
        operators=operators,
        key_groups=list(owned_key_groups(info)),
        ended_inputs=ended_inputs,
        finished_at=finished_at,
    )
    manifest = f"{directory}/{MANIFEST}"
    return snapshot, manifest, storage.write_json(manifest, snapshot.to_json())


def owned_key_groups(info: TaskInfo) -> tuple[int, int]:
    """[first, last + 1) of the key groups a subtask owns, as recorded in its manifest."""
    owned = key_group_range(info.subtask_index, info.parallelism, info.max_parallelism)
    return owned.start, owned.stop
