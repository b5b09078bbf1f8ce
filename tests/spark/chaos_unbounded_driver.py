"""The unbounded chaos test's driver: runs the unbounded jobs of one chain of a plan in
order, each until it has FINISHED (its sequence ended), under ``local[2,4]`` (Spark
retries failed tasks); prints a RESULT line.

Run by tests/spark/test_chaos_unbounded.py, which kills it (SIGKILL to its process
group) at random moments, sends its jobs stop and savepoint requests, and starts it
again with the same plan after a kill; faults of the plan kill it at fixed points too.
A job whose run STOPPED (a stop request) is started again at once on the same job name
and checkpoint directory, and continues from its savepoint. A job's outcome is recorded
in ``<base>/done/<chain>-<job>.json``; a restarted driver skips those jobs.

A driver the plan pauses (``FLINTLOCK_PAUSE_AT``: it stops itself between its lease
check and the publish of a checkpoint) and the test resumes once a successor took the
job over prints one RESULT with its outcome under ``paused`` and exits: it records no
outcome and runs no further job.

The twin job runs in every chain: its drivers wait for each other (a file per chain in
``<base>/twin``) and call ``execute()`` together, same job name, same checkpoint
directory. The one refused with a JobLeaseError (or that loses its lease, LeaseLostError)
has the outcome ``lease``: another driver has the job.

The jobs' checkpoint directory and outputs are what the plan names (a local folder, or
plain ``s3://`` URIs with the plan's ``storage_options``); marker files and outcomes stay
in the local ``<base>``.

Prints ``READY`` once Spark is up, ``START <job>`` / ``DONE <job> <outcome>`` around each
job and ``EPOCH <job> <checkpoint id> <kind> <seconds> <epoch of the run>`` after each
committed epoch, flushed, so the test can time its kills and requests.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import chaos_faults
import pyarrow as pa
from chaos_faults import Fault, FaultyFileSink, FaultyKeyedProcess, FaultyMap
from job_scripts import print_result, start_session

from flintlock.core.api.triggers import EpochTrigger
from flintlock.core.checkpoint.fences import PAUSE_MARKER
from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.core.errors import FlintlockError

MAX_EXECUTES = 6
"""Failed ``execute()`` calls a job may take in one driver process before it gives up."""
MAX_STOPS = 8
"""Runs of a job that end STOPPED before the driver gives up on it."""
LEASE_ERRORS = {"JobLeaseError", "LeaseLostError"}
"""Another driver holds the job (matched by name: the lease API may not be there yet)."""
TWIN_WAIT = 180.0
"""Seconds a twin driver waits for the others to be ready."""
KEYS = 37
ROWS_PER_FILE = 100
"""Files roll over between batches only: a sink subtask writes one file per epoch."""
OUTPUT = pa.schema([("id", pa.int64()), ("event_time", pa.int64()), ("v", pa.string())])
"""What the sink writes: the sequence's id and event time (= id) and a label of the id."""


Builder = Callable[[Any, Path, dict[str, Any]], StreamExecutionEnvironment]
"""Makes a job's environment from the Spark session, the base folder and the job's plan."""


def faults_at(job: dict[str, Any], where: str) -> list[Fault]:
    return [Fault.from_json(f) for f in job["faults"] if f["where"] == where]


def label(row: dict[str, Any]) -> dict[str, Any]:
    """Each row with a payload derived from its id, checked at the end."""
    return {"id": row["id"], "event_time": row["event_time"], "v": f"row-{row['id']}"}


def key_of(row: dict[str, Any]) -> int:
    return int(row["id"]) % KEYS


def build(spark: Any, base: Path, job: dict[str, Any]) -> StreamExecutionEnvironment:
    """The job: a sequence of ``rows`` ids from ``first_id`` -> label -> faulty map ->
    (key by id, faulty keyed process) -> faulty FileSink; its checkpoint directory and
    output are local paths or plain ``s3://`` URIs (with the plan's storage options)."""
    markers = str(base / "markers")
    env = StreamExecutionEnvironment(
        parallelism=job["parallelism"],
        spark=spark,
        checkpoint_dir=job["checkpoint_dir"],
        storage_options=job.get("storage_options"),
    )
    first = job["first_id"]
    stream = env.from_sequence(
        start=first, end=first + job["rows"], rows_per_epoch=job["per_epoch"]
    )
    stream = stream.map(label, name="chaos-label", output_schema=OUTPUT)
    stream = stream.map(FaultyMap(markers, faults_at(job, "map")), name="chaos-map")
    if job["keyed"]:
        process = FaultyKeyedProcess(markers, faults_at(job, "process"))
        stream = stream.key_by(key_of).process(process, name="chaos-process")
    files = FaultyFileSink(
        job["output"], markers, faults_at(job, "files"), rows_per_file=ROWS_PER_FILE
    )
    stream.sink_to(files)
    return env


def progress_of(base: Path, job: dict[str, Any]) -> Any:
    """The progress callback: an EPOCH line, then the kills due between epochs."""
    markers = str(base / "markers")
    kills = [f for f in faults_at(job, "driver") if f.kind == "kill_between_epochs"]

    def progress(figures: dict[str, Any]) -> None:
        checkpoint = figures["checkpoint_id"]
        print(
            f"EPOCH {job['name']} {checkpoint} {figures['kind']} {figures['seconds']:.3f} "
            f"{figures['epoch']}",
            flush=True,
        )
        for fault in kills:
            if checkpoint >= fault.epoch:
                chaos_faults.fire(markers, fault)

    return progress


def is_lease_error(error: BaseException) -> bool:
    """Whether ``error`` says another driver holds the job (JobLeaseError and subclasses)."""
    return any(kind.__name__ in LEASE_ERRORS for kind in type(error).__mro__)


def run_job(
    spark: Any,
    base: Path,
    job: dict[str, Any],
    build: Builder = build,
    trigger: EpochTrigger | None = None,
) -> dict[str, Any]:
    """Start the job until it has FINISHED; a STOPPED run is started again at once.
    ``build`` makes the job's environment (the sink chaos suites bring their own); with
    ``trigger`` (``available_now``: the Kafka chaos suite) a STOPPED run is the end."""
    outcome: dict[str, Any] = {"executes": 0, "stopped": 0, "failed": [], "epochs": 0}
    while True:
        outcome["executes"] += 1
        try:
            env = build(spark, base, job)
            result = env.execute(job["name"], trigger=trigger, progress=progress_of(base, job))
        except FlintlockError as error:
            text = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
            print(f"FAILED {job['name']} {text}", flush=True)
            if is_lease_error(error):
                return {**outcome, "outcome": "lease", "error": text}
            outcome["failed"].append(text)
            if len(outcome["failed"]) >= MAX_EXECUTES:
                return {**outcome, "outcome": "gave_up", "error": text}
            continue
        except Exception as error:  # not a flintlock error: a bug, reported by the test
            text = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
            print(f"CRASHED {job['name']} {text}", flush=True)
            return {**outcome, "outcome": "crashed", "error": text}
        outcome["epochs"] += result.epochs
        if result.status == "FINISHED" or trigger is not None:
            break
        outcome["stopped"] += 1
        print(f"STOPPED {job['name']} {result.savepoint_path}", flush=True)
        if outcome["stopped"] >= MAX_STOPS:
            return {**outcome, "outcome": "gave_up", "error": f"{result.status} too often"}
    for fault in faults_at(job, "driver"):
        if fault.kind == "kill_after_execute":
            chaos_faults.fire(str(base / "markers"), fault)  # killed after FINISHED
    ended = "finished" if result.status == "FINISHED" else "stopped"
    return {**outcome, "outcome": ended, "already_finished": result.already_finished}


def was_paused() -> bool:
    """Whether this driver was paused by the test (``FLINTLOCK_PAUSE_MARKER`` exists)."""
    marker = os.environ.get(PAUSE_MARKER)
    return bool(marker) and Path(marker).exists()


def wait_for_twins(base: Path, job: dict[str, Any], chain: int, chains: int) -> None:
    """Say this driver is ready for the twin job; wait until every chain's driver is."""
    folder = base / "twin"
    folder.mkdir(exist_ok=True)
    (folder / f"{job['name']}-{chain}.ready").touch()
    deadline = time.monotonic() + TWIN_WAIT
    while len(list(folder.glob(f"{job['name']}-*.ready"))) < chains:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the other drivers of {job['name']} never came")
        time.sleep(0.02)


def main(plan_path: str) -> None:
    plan = json.loads(Path(plan_path).read_text())
    base, chain = Path(plan["base"]), plan["chain"]
    options = plan.get("storage_options") or None  # S3's settings: never in a URI
    for folder in ("markers", "done"):
        (base / folder).mkdir(parents=True, exist_ok=True)
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(chaos_faults)  # workers cannot import tests/
    spark = start_session("local[2,4]")
    print("READY", flush=True)
    ran = {}
    for job in plan["jobs"]:
        done = base / "done" / f"{chain}-{job['name']}.json"
        if done.exists():
            continue
        if job.get("twin"):
            wait_for_twins(base, job, chain, plan["chains"])
        print(f"START {job['name']}", flush=True)
        ran[job["name"]] = run_job(spark, base, {**job, "storage_options": options})
        if was_paused():  # a stale driver, resumed: it records nothing and runs nothing more
            print_result({"paused": {"job": job["name"], **ran[job["name"]]}})
            sys.stdout.flush()
            os._exit(0)
        done.with_suffix(".tmp").write_text(json.dumps(ran[job["name"]]))
        os.replace(done.with_suffix(".tmp"), done)
        print(f"DONE {job['name']} {ran[job['name']]['outcome']}", flush=True)
    spark.stop()
    print_result({"ran": ran})


if __name__ == "__main__":
    main(sys.argv[1])
