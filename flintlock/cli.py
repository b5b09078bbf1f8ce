"""The ``flintlock`` command: run a job file on Spark, or list the installed plugins.

Flink's ``flink run``: the job file runs as ``__main__``, and the command's options reach
its environments through variables that ``execute()`` reads (``FLINTLOCK_NEW_RUN`` and its
kin), so the same file also runs unchanged as ``python job.py`` or under spark-submit."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import runpy
import sys
from collections.abc import Iterator
from importlib import metadata

from flintlock.core.api.restart_strategies import RESTART_STRATEGY_ENV, RestartStrategy
from flintlock.core.datastream.live_page import UI_PORT_ENV
from flintlock.core.errors import FlintlockError, JobCanceled, SparkSetupError
from flintlock.core.hooks.manager import build_plugin_manager, installed_plugins
from flintlock.core.hooks.registry import KINDS, build_registry
from flintlock.core.job.control import PROGRESS_ENV
from flintlock.core.job.signals import stop_signals
from flintlock.core.metrics.recorder import METRICS_PORT_ENV
from flintlock.job_commands import add_job_commands, job_command
from flintlock.ui.command import add_ui_command

PARALLELISM_ENV = "FLINTLOCK_PARALLELISM"
MASTER_ENV = "FLINTLOCK_MASTER"
NEW_RUN_ENV = "FLINTLOCK_NEW_RUN"  # read by StreamExecutionEnvironment.execute
SPARK_UI_ENV = "FLINTLOCK_SPARK_UI"  # read by StreamExecutionEnvironment.execute
FROM_SAVEPOINT_ENV = "FLINTLOCK_FROM_SAVEPOINT"  # read by StreamExecutionEnvironment.execute
BROKEN_PIPE_EXIT = 141  # 128 + SIGPIPE: what a shell reports for `cat big | head -1`
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

DESCRIPTION = (
    "Run a flintlock job file on Spark, list the installed plugins, or inspect checkpoints."
)
RUN_DESCRIPTION = """\
Run a Python job file as __main__. The StreamExecutionEnvironments it creates default
to the options given here; with no Spark session active and no --master, an embedded
local Spark starts by itself.

Ctrl-C (or SIGTERM) stops an unbounded job at its next epoch boundary with a savepoint;
a second one cancels it. Either way its next start continues from there.

In a terminal a live display shows the run (rows in and out per vertex, rows per
second, epoch, checkpoint, watermark, the running Spark job's stages and tasks);
otherwise one line per epoch goes to stderr. --quiet prints nothing but errors.


flintlock's own options go before the job file; everything after it is the job's own
(its sys.argv[1:]), options included:
  flintlock run --parallelism 8 job.py 2024-01-01
  flintlock run --master spark://host:7077 job.py --input data/ --verbose
  flintlock run --from-savepoint checkpoints/orders/savepoints/savepoint-7-1a2b3c job.py"""


def flintlock_version(distribution: str = "flintlock") -> str:
    """The installed distribution's version; flintlock.__version__ when run from a checkout."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        from flintlock import __version__

        return __version__


def list_plugins() -> int:
    """Print every task type, state backend, operator and sink with its distribution."""
    distributions = {p.name: p.distribution for p in installed_plugins()}
    registry = build_registry(build_plugin_manager())
    for kind in KINDS:
        print(f"{kind}s:")
        for entry in registry.describe(kind):
            dist = distributions.get(entry.plugin_name, "?")
            print(f"  {entry.name:<24} {dist} ({entry.plugin_name})")
    return 0


@contextlib.contextmanager
def job_process_settings(argv: list[str], environment: dict[str, str]) -> Iterator[None]:
    """Give the job its sys.argv and environment variables; restore both afterwards."""
    saved_argv = sys.argv
    saved_environment = {name: os.environ.get(name) for name in environment}
    sys.argv = argv
    os.environ.update(environment)
    try:
        yield
    finally:
        sys.argv = saved_argv
        for name, value in saved_environment.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_job(
    path: str,
    parallelism: int | None = None,
    master: str | None = None,
    job_args: list[str] | None = None,
    new_run: bool = False,
    metrics_port: int | None = None,
    quiet: bool = False,
    spark_ui: bool = False,
    from_savepoint: str | None = None,
    restart_strategy: str | None = None,
    ui_port: int | None = None,
) -> int:
    """Run ``path`` as ``__main__`` with ``sys.argv == [path, *job_args]``.

    Environments it creates default to ``parallelism`` and ``master``; ``new_run`` makes
    ``execute()`` run the job again even if a finished run of it is recorded;
    ``from_savepoint`` is the default of ``execute(restore_from=...)``; ``quiet`` turns
    the progress off, ``spark_ui`` turns Spark's UI on; ``ui_port`` serves each job's
    live page there (``execute(ui_port=...)``).
    """
    if not os.path.isfile(path):
        print(f"flintlock: error: no job file at {path}", file=sys.stderr)
        return 2
    environment = {}
    if parallelism is not None:
        environment[PARALLELISM_ENV] = str(parallelism)
    if master is not None:
        environment[MASTER_ENV] = master
    if new_run:
        environment[NEW_RUN_ENV] = "1"
    if from_savepoint is not None:
        environment[FROM_SAVEPOINT_ENV] = from_savepoint
    if restart_strategy is not None:
        environment[RESTART_STRATEGY_ENV] = restart_strategy
    if metrics_port is not None:
        environment[METRICS_PORT_ENV] = str(metrics_port)
    if ui_port is not None:
        environment[UI_PORT_ENV] = str(ui_port)
    environment[PROGRESS_ENV] = "0" if quiet else "1"  # a live display, or a line per epoch
    if spark_ui:
        environment[SPARK_UI_ENV] = "1"
    try:
        with job_process_settings([path, *(job_args or [])], environment), stop_signals():
            runpy.run_path(path, run_name="__main__")
    except SparkSetupError as error:
        print(f"flintlock: error: {error}", file=sys.stderr)
        return 2
    except JobCanceled as error:
        print(
            f"flintlock: {error}; the next start continues from its last checkpoint",
            file=sys.stderr,
        )
        return 130
    except KeyboardInterrupt:
        print("flintlock: interrupted", file=sys.stderr)
        return 130
    except FlintlockError as error:
        print(f"flintlock: job failed: {error}", file=sys.stderr)
        return 1
    return 0


def checkpoints_command(args: argparse.Namespace) -> int:
    """``flintlock checkpoints list|show|read``: print what a checkpoint folder holds."""
    from flintlock.core.checkpoint import reader, state_reader

    try:
        if args.action == "list":
            for c in reader.list_checkpoints(args.dir):
                if not c.completed:
                    print(f"chk-{c.checkpoint_id}  incomplete  {c.path}")
                    continue
                commits = "committed" if c.committed else "pending"
                flags = ("final" if c.final else "-", "-" if c.savepoint == c.path else commits)
                savepoint = f"  savepoint {c.savepoint}" if c.savepoint else ""
                print(
                    f"chk-{c.checkpoint_id}  {c.job_name}  run {c.run_id}  {flags[0]}  "
                    f"{flags[1]}  {c.subtasks} subtasks  {c.path}{savepoint}"
                )
        elif args.action == "show":
            print(json.dumps(state_reader.describe(reader.load_checkpoint(args.dir)), indent=1))
        else:
            table = state_reader.read_state(args.dir, args.operator, args.state)
            for row in table.to_pylist():
                print(json.dumps(row, default=str, sort_keys=True))
    except FlintlockError as error:
        print(f"flintlock: error: {error}", file=sys.stderr)
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The command line: ``flintlock [--version] {run,plugins,checkpoints} ...``."""
    parser = argparse.ArgumentParser(prog="flintlock", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"flintlock {flintlock_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run",
        help="run a job file (embedded local Spark by default)",
        description=RUN_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("job", help="a Python file that builds and executes a flintlock job")
    run.add_argument(
        "job_args",
        nargs=argparse.REMAINDER,
        metavar="ARG",
        help="everything after the job file, options included: the job's sys.argv[1:]",
    )
    run.add_argument("--parallelism", type=int, help="default parallelism of the job")
    run.add_argument("--master", help="Spark master URL, e.g. local[4] or spark://host:7077")
    run.add_argument(
        "--restart-strategy",
        metavar="SPEC",
        help="how a failed run restarts by itself (default none): fixed-delay:ATTEMPTS:MS, "
        "exponential-delay:INITIAL_MS:MAX_MS or failure-rate:FAILURES:INTERVAL_MS:MS",
    )
    run.add_argument(
        "--new-run",
        action="store_true",
        help="run the job again even if a finished run of it is recorded in its "
        "checkpoint directory",
    )
    run.add_argument(
        "-s",
        "--from-savepoint",
        metavar="PATH",
        help="start the job's state from this savepoint (or chk-<N> folder, or a job's "
        "folder for its latest checkpoint), as Flink's -s: operators are matched by uid, "
        "at any parallelism",
    )
    run.add_argument(
        "--metrics-port",
        type=int,
        help="serve the job's metrics for Prometheus on this port while it runs",
    )
    run.add_argument(
        "--ui",
        type=int,
        metavar="PORT",
        dest="ui_port",
        help="serve the job's live web page on this loopback port while it runs (0: any; "
        "read-only; `flintlock ui` serves any job folder)",
    )
    run.add_argument(
        "-q", "--quiet", action="store_true", help="print nothing but errors (no progress)"
    )
    run.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        help="the level of flintlock's log messages on stderr (default WARNING; ERROR "
        "with --quiet)",
    )
    run.add_argument(
        "--spark-ui",
        action="store_true",
        help="turn Spark's web UI on in the embedded session and print its address",
    )
    commands.add_parser(
        "plugins",
        help="list installed task types, state backends, operators and sinks",
        description="List every installed task type, state backend, operator and sink "
        "with the distribution that provides it.",
    )
    checkpoints = commands.add_parser(
        "checkpoints",
        help="list, show or read checkpoints and savepoints offline (no Spark)",
        description="Inspect checkpoints offline. DIR is a chk-<N> folder, a savepoint, or a "
        "job's folder (list: all its checkpoints; show and read: its latest).",
    )
    actions = checkpoints.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser(
        "list", help="every checkpoint of a job folder (or a checkpoint's or savepoint's own)"
    ).add_argument("dir")
    actions.add_parser("show", help="a checkpoint's operators and states, as JSON").add_argument(
        "dir"
    )
    read = actions.add_parser("read", help="one state's rows, as JSON lines")
    read.add_argument("dir")
    read.add_argument("--operator", required=True, help="the operator's uid or name")
    read.add_argument("--state", required=True, help="the state's name")
    add_job_commands(commands)
    add_ui_command(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``flintlock`` console script.

    A reader that goes away early (``flintlock status JOB | head -3``) ends the command
    quietly with the exit code of a process killed by SIGPIPE, as ``cat`` does, instead of
    a ``BrokenPipeError`` traceback."""
    try:
        code = dispatch(argv)
        sys.stdout.flush()  # the buffered rest: a closed pipe shows here, not at exit
    except BrokenPipeError:
        silence_stdout()
        return BROKEN_PIPE_EXIT
    return code


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's flush at exit, after the
    reader closed the pipe, does not print "Exception ignored ... BrokenPipeError"
    (nothing to do for a stdout without a file descriptor, as under pytest)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)


def dispatch(argv: list[str] | None) -> int:
    """Parse the command line and run the command it names; its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    passed_through: list[str] = []
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    if "--" in argv and command != "run":  # a job's arguments are split at its file
        cut = argv.index("--")
        argv, passed_through = argv[:cut], argv[cut + 1 :]
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if args.command == "checkpoints":
        if unknown or passed_through:
            parser.error(f"unrecognized arguments: {' '.join(unknown + passed_through)}")
        return checkpoints_command(args)
    if args.command in ("savepoint", "stop", "status", "report", "metrics"):
        if unknown or passed_through:
            parser.error(f"unrecognized arguments: {' '.join(unknown + passed_through)}")
        return job_command(args)
    if args.command == "ui":
        if unknown or passed_through:
            parser.error(f"unrecognized arguments: {' '.join(unknown + passed_through)}")
        from flintlock.ui.command import ui_command

        return ui_command(args.dir, args.host, args.port, args.control)
    if args.command == "plugins":
        if unknown or passed_through:
            parser.error(f"plugins takes no arguments: {' '.join(unknown + passed_through)}")
        return list_plugins()
    if unknown:
        parser.error(
            f"unrecognized arguments: {' '.join(unknown)} (flintlock's own options go before "
            f"the job file, the job's own after it: flintlock run [OPTIONS] JOB.py [ARG ...])"
        )
    job_args = list(args.job_args)
    if job_args[:1] == ["--"]:  # the separator some Python versions leave in place
        job_args = job_args[1:]
    if args.restart_strategy is not None:
        try:
            RestartStrategy.parse(args.restart_strategy)
        except ValueError as error:
            parser.error(str(error))
    set_log_level(args.log_level or ("ERROR" if args.quiet else "WARNING"))
    return run_job(
        args.job,
        args.parallelism,
        args.master,
        job_args,
        args.new_run,
        args.metrics_port,
        quiet=args.quiet,
        spark_ui=args.spark_ui,
        from_savepoint=args.from_savepoint,
        restart_strategy=args.restart_strategy,
        ui_port=args.ui_port,
    )


def set_log_level(level: str) -> None:
    """flintlock's loggers ("flintlock.*") log at ``level`` and above to stderr."""
    logger = logging.getLogger("flintlock")
    logger.setLevel(level)
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("flintlock: %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)


if __name__ == "__main__":
    sys.exit(main())
