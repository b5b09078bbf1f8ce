"""The ``flintlock`` command: run a job file on Spark, or list the installed plugins."""

from __future__ import annotations

import argparse
import os
import runpy
import sys

from flintlock.core.errors import FlintlockError
from flintlock.core.plugin_manager import build_plugin_manager, installed_plugins
from flintlock.core.registry import KINDS, build_registry
from flintlock.core.spark_session import SparkSetupError

PARALLELISM_ENV = "FLINTLOCK_PARALLELISM"
MASTER_ENV = "FLINTLOCK_MASTER"


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


def run_job(path: str, parallelism: int | None, master: str | None) -> int:
    """Run ``path`` as ``__main__``; environments it creates default to these settings."""
    if not os.path.isfile(path):
        print(f"flintlock: error: no job file at {path}", file=sys.stderr)
        return 2
    if parallelism is not None:
        os.environ[PARALLELISM_ENV] = str(parallelism)
    if master is not None:
        os.environ[MASTER_ENV] = master
    sys.argv = [path]
    try:
        runpy.run_path(path, run_name="__main__")
    except SparkSetupError as error:
        print(f"flintlock: error: {error}", file=sys.stderr)
        return 2
    except FlintlockError as error:
        print(f"flintlock: job failed: {error}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``flintlock`` console script."""
    parser = argparse.ArgumentParser(prog="flintlock", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a job file (embedded local Spark by default)")
    run.add_argument("job", help="a Python file that builds and executes a flintlock job")
    run.add_argument("--parallelism", type=int, help="default parallelism of the job")
    run.add_argument("--master", help="Spark master URL, e.g. local[4] or spark://host:7077")
    commands.add_parser("plugins", help="list installed task types, backends, operators, sinks")
    args = parser.parse_args(argv)
    if args.command == "plugins":
        return list_plugins()
    return run_job(args.job, args.parallelism, args.master)


if __name__ == "__main__":
    sys.exit(main())
