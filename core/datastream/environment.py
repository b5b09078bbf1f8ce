"""The StreamExecutionEnvironment: where a program's sources are made (``from_*``, in
source_methods.py) and its job runs (parallelism, Spark session, checkpoint storage,
state backend, plugins).

Named as Flink's, and ``execute()`` runs from any PySpark driver (spark-submit, a
notebook, ``flintlock run``) over the active Spark session or a local one it starts. The
``from_*`` methods are the class's other half in source_methods.py, so that neither module
passes core/'s 400 lines (CONTRIBUTING.md, "Layout")."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from flintlock.core.api.restart_strategies import RESTART_STRATEGY_ENV, RestartStrategy
from flintlock.core.api.sink import TwoPhaseCommitSink
from flintlock.core.api.triggers import EpochTrigger
from flintlock.core.checkpoint.job_folder import check_job_name
from flintlock.core.checkpoint.restore import operator_uids, prepare_restore
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.datastream.checks import check_parallelism, is_int
from flintlock.core.datastream.live_page import live_page, ui_port_option
from flintlock.core.datastream.restarts import execute_with_restarts
from flintlock.core.datastream.source_methods import SourceMethods
from flintlock.core.errors import GraphError
from flintlock.core.hooks.manager import plugins_for
from flintlock.core.job.checks import check_before_spark, check_sink_outputs, finished_before
from flintlock.core.job.client import JobClient
from flintlock.core.job.control import PROGRESS_ENV
from flintlock.core.job.lease import DEFAULT_RENEW_SECONDS
from flintlock.core.job.master import JobConfig, JobMaster
from flintlock.core.job.progress import ProgressOption, shown
from flintlock.core.job.result import JobExecutionResult
from flintlock.core.metrics.recorder import metrics_options
from flintlock.core.plan.graph import InputEdge, Transformation
from flintlock.core.runtime.operator import StreamOperator
from flintlock.core.spark.session import active_or_local_session, spark_ui_url
from flintlock.core.spark.worker_probe import check_workers
from flintlock.core.storage.options import NO_OPTIONS, StorageOptions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NEW_RUN_ENV = "FLINTLOCK_NEW_RUN"
"""Set to 1 by ``flintlock run --new-run``: the default of ``execute(new_run=...)``."""
SPARK_UI_ENV = "FLINTLOCK_SPARK_UI"
"""Set to 1 by ``flintlock run --spark-ui``: the default of ``spark_ui``."""
FROM_SAVEPOINT_ENV = "FLINTLOCK_FROM_SAVEPOINT"
"""Set by ``flintlock run --from-savepoint PATH``: the default of ``restore_from``."""

MAX_MAX_PARALLELISM = 32768
"""Flink's upper bound for max parallelism (the number of key groups)."""


class StreamExecutionEnvironment(SourceMethods):
    """Where a program is built and run: parallelism, Spark session, checkpoint storage.

    With no session given it uses the active one, or starts one and stops it after
    ``execute``: under ``spark-submit`` (or where Spark's configuration names a master)
    it takes Spark's configuration as it is, else it is an embedded local one named after
    the job. Outside local mode ``checkpoint_dir`` is required. The
    driver running a job holds a lease on it, renewed every ``lease_seconds`` (a lease
    not renewed for 5 periods is taken over by the next start).
    """

    def __init__(
        self,
        parallelism: int | None = None,
        spark: SparkSession | None = None,
        checkpoint_dir: str | None = None,
        max_parallelism: int = 128,
        state_backend: str = "hashmap",
        plugins: Iterable[object] = (),
        master: str | None = None,
        keep_temporary_checkpoints: bool = False,
        retained_checkpoints: int = 1,
        lease_seconds: float = DEFAULT_RENEW_SECONDS,
        spark_ui: bool | None = None,
        storage_options: Mapping[str, str] | None = None,
        restart_strategy: RestartStrategy | None = None,
    ) -> None:
        self.storage_options = StorageOptions(storage_options)
        if restart_strategy is not None and not isinstance(restart_strategy, RestartStrategy):
            raise GraphError(
                f"restart_strategy must be a RestartStrategy (RestartStrategy.fixed_delay(3, "
                f"1000), ...), not {restart_strategy!r}"
            )
        self.restart_strategy = restart_strategy or _restart_strategy_from_env()
        if not is_int(max_parallelism) or not 0 < max_parallelism <= MAX_MAX_PARALLELISM:
            raise GraphError(
                f"max_parallelism {max_parallelism!r} must be an int in 1..{MAX_MAX_PARALLELISM}"
            )
        if parallelism is None:
            from_env = os.environ.get("FLINTLOCK_PARALLELISM")  # set by `flintlock run`
            if from_env:
                parallelism = _parallelism_from_env(from_env)
            else:
                parallelism = min(os.cpu_count() or 2, max_parallelism)
        check_parallelism(parallelism, max_parallelism, "StreamExecutionEnvironment: parallelism")
        self.parallelism = parallelism
        self.spark = spark
        self.master = master or os.environ.get("FLINTLOCK_MASTER")
        self.checkpoint_dir = checkpoint_dir
        self.keep_temporary_checkpoints = keep_temporary_checkpoints
        if not is_int(retained_checkpoints) or retained_checkpoints < 1:
            raise GraphError(
                f"retained_checkpoints {retained_checkpoints!r} must be an int >= 1 (the "
                f"completed checkpoints a job keeps)"
            )
        self.retained_checkpoints = retained_checkpoints
        if not isinstance(lease_seconds, int | float) or not lease_seconds > 0:
            raise GraphError(
                f"lease_seconds {lease_seconds!r} must be a number > 0 (how often the driver "
                f"renews its lease on the job)"
            )
        self.lease_seconds = float(lease_seconds)
        self.spark_ui = spark_ui
        self.max_parallelism = max_parallelism
        self.state_backend = state_backend
        self.plugins = list(plugins)
        self.registry = plugins_for(self.plugins)[1]
        self.registry.get("state backend", state_backend)  # a clear error for a wrong name
        self.transformations: list[Transformation] = []

    # ---- running ----

    def execute(
        self,
        job_name: str = "job",
        new_run: bool | None = None,
        state_backend: str | None = None,
        restore_from: str | None = None,
        allow_non_restored_state: bool = False,
        trigger: EpochTrigger | None = None,
        progress: ProgressOption = None,
        spark_ui: bool | None = None,
        metrics: bool | None = None,
        metrics_port: int | None = None,
        ui_port: int | None = None,
    ) -> JobExecutionResult:
        """Run the program: a bounded job as one epoch (final checkpoint, commits); a job
        with unbounded sources as epochs, each ending in a committed checkpoint, started
        as ``trigger`` says (default: back to back), until its input ends or it is stopped
        (``flintlock stop``, ``JobClient.stop``); ``progress`` gets each epoch's figures.

        A job is (checkpoint dir, job name). If a run of it FINISHED before, its stored
        result is returned and nothing runs; if its final checkpoint completed but the
        commit did not, the commit is completed. ``new_run=True`` (``flintlock run
        --new-run``, or FLINTLOCK_NEW_RUN=1) runs the job again anyway; its sinks' output
        modes decide what it may do to their existing output. With no ``checkpoint_dir``
        (local mode only) a temporary one is used and removed after the job, unless
        ``keep_temporary_checkpoints`` is set. ``state_backend`` names the state backend of
        this job (default: the environment's).

        ``restore_from`` (a ``chk-<N>`` folder, a savepoint, or a job's folder for its
        latest checkpoint) gives a run that starts its state: operators are matched by uid,
        at any parallelism. It is checked before Spark starts; state of an operator the job
        no longer has is refused unless ``allow_non_restored_state``. ``flintlock run
        --from-savepoint PATH`` (FLINTLOCK_FROM_SAVEPOINT) gives its default.

        Before Spark starts (or runs a job in a given session), every sink checks its
        output from its configuration and the stream's schema (``check_output``: a table
        that does not fit, a server out of reach), unless the start only returns a
        finished run's result.

        ``metrics`` (default on, ``FLINTLOCK_METRICS=0`` turns it off) takes Flink's metrics
        each epoch: ``result.metrics``, ``flintlock metrics JOB``, the job folder's
        ``metrics/``; ``metrics_port`` also serves them for Prometheus while the job runs.
        ``progress``: True shows the run (live in a terminal, else a line per epoch on
        stderr), False nothing, a callable gets each epoch's figures; by default a
        terminal shows it. ``spark_ui=True`` turns Spark's UI on in the embedded session
        and prints its address; each epoch's Spark job is named after the job and epoch.
        ``ui_port`` (``flintlock run --ui PORT``) serves the job's live page (``flintlock
        ui``) on loopback, read-only; 0 takes any free port. The page stays for the
        process, as Spark's UI stays with its session; its next job is shown there.
        """
        if not any(t.is_sink for t in self.transformations):
            raise GraphError("the program has no sink: add sink_to(...), print() or collect()")
        check_job_name(job_name)
        ui_port = ui_port_option(ui_port)
        backend = state_backend if state_backend is not None else self.state_backend
        self.registry.get("state backend", backend)  # a clear error for a wrong name
        check_before_spark(
            self.transformations, self.checkpoint_dir, self.plugins, self.storage_options
        )
        uids = operator_uids(self.transformations)
        restore = None
        if restore_from is None:
            restore_from = os.environ.get(FROM_SAVEPOINT_ENV) or None
        if restore_from is not None:
            restore = prepare_restore(
                restore_from,
                uids,
                self.max_parallelism,
                allow_non_restored_state,
                storage=savepoint_storage(restore_from, self.checkpoint_dir, self.storage_options),
            )
        if new_run is None:
            new_run = os.environ.get(NEW_RUN_ENV, "") not in ("", "0")
        if new_run or not finished_before(self.checkpoint_dir, job_name, self.storage_options):
            check_sink_outputs(self.transformations, job_name)  # before any Spark job
        if spark_ui is None:
            spark_ui = self.spark_ui
        if spark_ui is None:
            spark_ui = os.environ.get(SPARK_UI_ENV, "") not in ("", "0")
        spark, owned = active_or_local_session(self.spark, self.master, spark_ui, job_name)
        if spark_ui:
            _print_spark_ui(spark)
        if not owned:  # flintlock checked the Python of the workers it starts itself
            check_workers(spark)
        temporary = None
        try:
            checkpoint_dir = self.checkpoint_dir
            if checkpoint_dir is None:
                master = _master(spark)
                if not _is_local(master):
                    raise GraphError(
                        f"Spark master {master or '(unknown)'} is not local mode: give "
                        f"checkpoint_dir, storage that the driver and every executor share"
                    )
                checkpoint_dir = temporary = tempfile.mkdtemp(prefix="flintlock-checkpoints-")
            config = JobConfig(
                job_name,
                checkpoint_dir,
                self.max_parallelism,
                backend,
                self.plugins,
                retained_checkpoints=self.retained_checkpoints,
                restore=restore,
                lease_seconds=self.lease_seconds,
                storage_options=self.storage_options,
            )
            config.metrics, config.metrics_port = metrics_options(metrics, metrics_port)
            page = live_page(ui_port, checkpoint_dir, job_name, self.storage_options, spark)
            with page, shown(progress, job_name, spark) as shown_progress:

                def run(first: bool) -> JobExecutionResult:
                    if not first:  # a restart goes on from the job's latest checkpoint
                        config.restore = None
                    master = JobMaster(spark, self.transformations, config)
                    started_anew = bool(new_run) and first
                    return master.execute(started_anew, trigger=trigger, progress=shown_progress)

                return execute_with_restarts(run, self.restart_strategy, job_name)
        finally:
            if temporary is not None and not self.keep_temporary_checkpoints:
                shutil.rmtree(temporary, ignore_errors=True)
            if owned:
                spark.stop()

    def execute_async(
        self,
        job_name: str = "job",
        trigger: EpochTrigger | None = None,
        **options: Any,
    ) -> JobClient:
        """Start ``execute`` in a driver thread; the JobClient takes savepoints, stops the
        job and returns its result. Needs ``checkpoint_dir``: the job is controlled
        through its folder there."""
        if self.checkpoint_dir is None:
            raise GraphError(
                "execute_async needs a checkpoint_dir: savepoint and stop requests go "
                "through the job's folder there"
            )
        check_job_name(job_name)
        client = JobClient(
            CheckpointStorage.from_uri(self.checkpoint_dir, self.storage_options), job_name
        )
        client.start(lambda: self.execute(job_name, trigger=trigger, **options))
        return client

    # ---- internals ----

    def _add(
        self,
        name: str,
        make_operator: Callable[[], StreamOperator],
        inputs: list[InputEdge],
        parallelism: int | None = None,
        is_source: bool = False,
        sink: TwoPhaseCommitSink[Any, Any] | None = None,
        is_sink: bool = False,
    ) -> Transformation:
        t = Transformation(
            id=len(self.transformations),
            name=name,
            make_operator=make_operator,
            parallelism=parallelism or self.parallelism,
            inputs=inputs,
            is_source=is_source,
            sink=sink,
            is_sink=is_sink,
        )
        self.transformations.append(t)
        return t

    def _unique(self, name: str) -> str:
        taken = {t.name for t in self.transformations}
        if name not in taken:
            return name
        n = 2
        while f"{name}-{n}" in taken:
            n += 1
        return f"{name}-{n}"

    def operator(self, kind: str) -> Callable[..., StreamOperator]:
        """The operator factory registered as ``kind``."""
        factory: Callable[..., StreamOperator] = self.registry.get("operator", kind)
        return factory


def savepoint_storage(
    restore_from: str, checkpoint_dir: str | None, options: StorageOptions = NO_OPTIONS
) -> CheckpointStorage | None:
    """The job's checkpoint storage if ``restore_from`` is a URI on it as flintlock hands
    them out (``s3://bucket/...`` without credentials or options): a savepoint or stop's
    answer restores with the job's own file system settings; elsewhere on an object
    store, the environment's ``storage_options`` open it."""
    if "://" not in restore_from:
        return None
    if checkpoint_dir is not None:
        storage = CheckpointStorage.from_uri(checkpoint_dir, options)
        if storage.path_of(restore_from) is not None:
            return storage
    if options:
        storage = CheckpointStorage.from_uri(restore_from, options)
        return storage if storage.path_of(restore_from) is not None else None
    return None


def _print_spark_ui(spark: SparkSession) -> None:
    """Say where Spark's UI is (unless ``flintlock run --quiet``), or that it is off."""
    if os.environ.get(PROGRESS_ENV) == "0":
        return
    url = spark_ui_url(spark)
    if url:
        print(f"flintlock: Spark UI at {url}", file=sys.stderr, flush=True)
    else:
        print(
            "flintlock: this Spark session has no UI (a session flintlock did not start "
            "keeps its own spark.ui.enabled)",
            file=sys.stderr,
            flush=True,
        )


def _master(spark: SparkSession) -> str | None:
    """The session's master URL; None if it cannot be read (a Spark Connect server)."""
    try:
        return str(spark.conf.get("spark.master"))
    except Exception:
        return None


def _is_local(master: str | None) -> bool:
    """True for ``local`` and ``local[...]``, whose tasks share this machine's disk (not
    ``local-cluster[...]``, whose executors may not); an unknown master is not local."""
    return master is not None and (master == "local" or master.startswith("local["))


def _parallelism_from_env(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise GraphError(
            f"FLINTLOCK_PARALLELISM={value!r} is not a number; set it to an int >= 1"
        ) from None


def _restart_strategy_from_env() -> RestartStrategy:
    spec = os.environ.get(RESTART_STRATEGY_ENV)
    if not spec:
        return RestartStrategy.none()
    try:
        return RestartStrategy.parse(spec)
    except ValueError as error:
        raise GraphError(f"{RESTART_STRATEGY_ENV}: {error}") from None
