"""``flintlock savepoint|stop|status|metrics|report JOB``: control a running unbounded job
from a shell, see its figures, or write its HTML run report.

A job's folder in checkpoint storage is the only channel to its driver (``JobClient``),
so these commands work from any machine that sees the storage, without a connection to
the driver's process or Spark."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from flintlock.core.checkpoint.job_folder import IDENTITY
from flintlock.core.checkpoint.paths import parent_folder
from flintlock.core.checkpoint.reader import storage_for
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.errors import FlintlockError, JobControlError
from flintlock.core.job.client import NOT_RUNNING, JobClient
from flintlock.core.job.control import progress_line
from flintlock.metrics_table import metrics_table, run_metrics


def add_job_commands(commands: Any) -> None:
    """The savepoint, stop and status sub-commands."""
    where = (
        "JOB is the job's folder (<checkpoint dir>/<job name>), or its name with --checkpoint-dir."
    )
    for name, text in (
        ("savepoint", "take a savepoint of a running job at its next epoch; it keeps running"),
        ("stop", "stop a running job with a savepoint at its next epoch"),
        ("status", "show a job's status, checkpoints, savepoint and per-epoch figures"),
        ("report", "save a job's page with its data: one HTML file that needs no server"),
        ("metrics", "show a job's metrics per vertex and subtask (its latest run)"),
    ):
        command = commands.add_parser(
            name, help=text, description=f"{text[0].upper()}{text[1:]}. {where}"
        )
        command.add_argument("job", metavar="JOB")
        command.add_argument("--checkpoint-dir", help="the job's checkpoint directory")
        if name == "report":
            command.add_argument(
                "-o", "--output", default="report.html", help="the HTML file (report.html)"
            )
        elif name == "metrics":
            command.add_argument(
                "--json", action="store_true", help="every epoch's metrics and the totals"
            )
        elif name != "status":
            command.add_argument(
                "--timeout", type=float, default=300.0, help="seconds to wait (default 300)"
            )
        if name == "stop":
            command.add_argument(
                "--drain",
                action="store_true",
                help="end the input first: MAX_WATERMARK fires every event-time timer, "
                "operators finish and the last data is committed",
            )


def job_command(args: argparse.Namespace) -> int:
    """Run one of the sub-commands; a flintlock error is one line on stderr, exit 1."""
    try:
        if args.command == "report":
            from flintlock.report import write_report

            report = write_report(args.job, args.output, args.checkpoint_dir)
            print(
                f"{args.output}: job {report.job_name!r}, {len(report.epochs)} epochs, "
                f"{len(report.failures)} failures"
            )
            return 0
        client = client_for(args.job, args.checkpoint_dir)
        if args.command == "savepoint":
            print(client.savepoint(args.timeout))
        elif args.command == "stop":
            print(client.stop(args.drain, args.timeout))
        elif args.command == "metrics":
            metrics = run_metrics(client.folder)
            print(json.dumps(metrics, indent=1) if args.json else metrics_table(metrics))
        else:
            print(describe_status(client.status()))
    except FlintlockError as error:
        print(f"flintlock: error: {error}", file=sys.stderr)
        return 1
    return 0


def client_for(job: str, checkpoint_dir: str | None) -> JobClient:
    """A client for the job named by its folder, or by its name and checkpoint dir; a
    folder or checkpoint dir is a local path or a URI (``s3://bucket/chk/job?...``)."""
    if checkpoint_dir is not None:
        return JobClient(storage_for(checkpoint_dir), job)
    storage = storage_for(job)
    folder = storage.base_path
    if not storage.exists(f"{folder}/{IDENTITY}"):
        raise JobControlError(
            f"{job} is not a job folder (no {IDENTITY} in it): give the job's folder, or "
            f"its name with --checkpoint-dir"
        )
    identity = storage.read_json(f"{folder}/{IDENTITY}")
    parent = CheckpointStorage(storage.filesystem, parent_folder(folder))
    return JobClient(parent, str(identity["job_name"]))


def describe_status(status: dict[str, Any]) -> str:
    """The status as a few lines of text: the job and how it runs or ended, its result,
    then one line per epoch."""
    state = status["status"]
    if state == NOT_RUNNING:
        since = status.get("since")
        when = (
            f" since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(since))} "
            f"({time.time() - since:.0f} s ago, its last heartbeat)"
            if since
            else ""
        )
        state = f"NOT RUNNING{when}: its driver is gone (recorded {status['recorded_status']})"
    elif state == "RUNNING" and status.get("pid"):
        state = f"RUNNING (pid {status['pid']} on host {status['host']})"
    lines = [
        f"job {status['job_name']!r}  {state}  run {status.get('run_id')}  "
        f"latest checkpoint {status.get('latest_checkpoint')}"
    ]
    trigger = status.get("trigger")
    if trigger:
        lines.append(f"trigger {trigger.get('kind')} {trigger.get('seconds', 0)} s")
    if status.get("savepoint"):
        lines.append(f"savepoint {status['savepoint']}")
    if status.get("error"):
        lines.append(f"error {status['error']}")
    result = status.get("result") or {}
    if result.get("records_out"):
        records = ", ".join(f"{name} {n:,}" for name, n in result["records_out"].items())
        lines.append(f"result: records out {records} in {result.get('duration_seconds', 0):.2f} s")
    for epoch in status.get("epochs", []):
        lines.append(progress_line(epoch))
    return "\n".join(lines)
