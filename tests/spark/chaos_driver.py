"""The chaos test's driver: runs the jobs of a plan in order, each until ``execute()``
succeeds, under ``local[2,4]`` (Spark retries failed tasks); prints a RESULT line.

Run by tests/spark/test_chaos.py, which kills it (SIGKILL to its process group) at
random moments and starts it again with the same plan; faults of the plan kill it at
fixed points too. A job whose ``execute()`` returned and whose outputs were saved is
recorded in ``<base>/done/``; a restarted driver skips those and starts the others again
with the same job name and checkpoint directory, as a user would after a crash. Prints
``READY`` once Spark is up and ``START <job>`` / ``DONE <job>`` around each job, flushed,
so the test can time its kills.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import chaos_faults
import pyarrow as pa
from chaos_faults import Fault, FaultyCollectSink, FaultyFileSink, FaultyKeyedProcess, FaultyMap
from job_scripts import print_result, start_session

from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.core.errors import FlintlockError

MAX_EXECUTES = 6
"""Failed ``execute()`` calls a job may take before the driver gives up."""


def input_table(job: dict[str, Any]) -> pa.Table:
    """The job's rows: ids unique over the whole plan, a key and a payload."""
    first = job["first_id"]
    ids = list(range(first, first + job["rows"]))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "key": pa.array([i % 37 for i in ids], pa.int64()),
            "v": pa.array([f"row-{i}" for i in ids], pa.string()),
        }
    )


def faults_at(job: dict[str, Any], where: str) -> list[Fault]:
    return [Fault.from_json(f) for f in job["faults"] if f["where"] == where]


def execute_once(spark: Any, base: Path, job: dict[str, Any]) -> pa.Table | None:
    """Build the job in a fresh environment and run it; the collected rows, if it collects."""
    markers = str(base / "markers")
    env = StreamExecutionEnvironment(
        parallelism=job["parallelism"], spark=spark, checkpoint_dir=str(base / "chk")
    )
    stream = env.from_arrow(input_table(job), batch_size=job["batch_size"])
    stream = stream.map(FaultyMap(markers, faults_at(job, "map")), name="chaos-map")
    if job["keyed"]:
        process = FaultyKeyedProcess(markers, faults_at(job, "process"))
        stream = stream.key_by("key").process(process, name="chaos-process")
    if job["sinks"] == "collect_api":
        return stream.execute_and_collect(job["name"])
    collect = None
    if job["sinks"] in ("files", "both"):
        files = FaultyFileSink(job["output"], markers, faults_at(job, "files"), rows_per_file=400)
        stream.sink_to(files)
    if job["sinks"] in ("collect", "both"):
        collect = FaultyCollectSink("chaos-collect", markers, faults_at(job, "collect"))
        stream.sink_to(collect, name="chaos-collect")
    result = env.execute(job["name"])
    if collect is None:
        return None
    return result.collected.get("chaos-collect", pa.table({}))


def run_job(spark: Any, base: Path, job: dict[str, Any]) -> dict[str, Any]:
    """Execute until success; save what the successful ``execute()`` returned."""
    errors = []
    while True:
        try:
            collected = execute_once(spark, base, job)
            break
        except FlintlockError as error:
            errors.append(f"{type(error).__name__}: {str(error).splitlines()[0][:300]}")
            print(f"FAILED {job['name']} {errors[-1]}", flush=True)
            if len(errors) >= MAX_EXECUTES:
                raise
    for fault in faults_at(job, "driver"):
        chaos_faults.fire(str(base / "markers"), fault)  # killed after execute() returned
    if collected is not None:
        path = base / "collected" / f"{job['name']}.arrow"
        with pa.OSFile(f"{path}.tmp", "wb") as sink, pa.ipc.new_file(sink, collected.schema) as w:
            w.write_table(collected)
        os.replace(f"{path}.tmp", path)
    return {"failed_executes": errors}


def main(plan_path: str) -> None:
    plan = json.loads(Path(plan_path).read_text())
    base = Path(plan["base"])
    for folder in ("markers", "collected", "done"):
        (base / folder).mkdir(parents=True, exist_ok=True)
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(chaos_faults)  # workers cannot import tests/
    spark = start_session("local[2,4]")
    print("READY", flush=True)
    ran = {}
    for job in plan["jobs"]:
        done = base / "done" / f"{job['name']}.json"
        if done.exists():
            continue
        print(f"START {job['name']}", flush=True)
        ran[job["name"]] = run_job(spark, base, job)
        done.with_suffix(".tmp").write_text(json.dumps(ran[job["name"]]))
        os.replace(done.with_suffix(".tmp"), done)
        print(f"DONE {job['name']}", flush=True)
    spark.stop()
    print_result({"ran": ran})


if __name__ == "__main__":
    main(sys.argv[1])
