"""The sink chaos suite's driver: runs the chaos job of one plan (tests/spark/
test_chaos_sinks.py) into its target's sink until the job has FINISHED, under
``local[2,4]`` (Spark retries failed tasks); prints a RESULT line.

The job is ``unbounded_jobs``' (a sequence of ``rows`` ids, ``per_epoch`` per epoch ->
keyed running sum -> sink), with the plan's faults: at a record of the keyed function
(``process``), in the sink through ``chaos_faults.FaultySink`` around the target's sink
(``sink``), and between epochs (``driver``). A failed ``execute()`` (a commit fault) is
started again in this process; a kill fault or the test SIGKILLs the driver, and the
test starts it again on the same job and checkpoint directory.

Prints ``READY``, ``START <job>``, ``EPOCH ...`` per committed epoch and ``DONE <job>
<outcome>``, flushed, as tests/spark/chaos_unbounded_driver.py does (whose ``run_job``
runs the job here).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import chaos_faults
import sink_chaos_targets
import unbounded_jobs
from chaos_faults import FaultsOfFunction, FaultySink
from chaos_unbounded_driver import Builder, faults_at, run_job
from job_scripts import print_result, start_session
from sink_chaos_targets import TARGETS, ChaosTarget

from flintlock.core.datastream.environment import StreamExecutionEnvironment


class FaultyRunningSum(FaultsOfFunction, unbounded_jobs.RunningSumUntilTheEnd):
    """The job's keyed running sum; its faults fire at the n-th record of a task attempt."""

    def __init__(self, markers: str, faults: list[chaos_faults.Fault]) -> None:
        self._plan(markers, faults)

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self._record()
        super().process_element(value, ctx, out)


def builder(target: ChaosTarget) -> Builder:
    """Builds the job with the plan's faults around ``target``'s sink."""

    def build(spark: Any, base: Path, job: dict[str, Any]) -> StreamExecutionEnvironment:
        markers = str(base / "markers")
        return unbounded_jobs.build(
            spark,
            str(base),
            end=job["rows"],
            per_epoch=job["per_epoch"],
            sink=FaultySink(target.make_sink(), markers, faults_at(job, "sink")),
            function=FaultyRunningSum(markers, faults_at(job, "process")),
            parallelism=job["parallelism"],
        )

    return build


def main(plan_path: str) -> None:
    plan = json.loads(Path(plan_path).read_text())
    base, job = Path(plan["base"]), plan["jobs"][0]
    (base / "markers").mkdir(parents=True, exist_ok=True)
    from pyspark import cloudpickle

    for module in (chaos_faults, unbounded_jobs, sink_chaos_targets):
        cloudpickle.register_pickle_by_value(module)  # workers cannot import tests/
    target = TARGETS[job["target"]](base)
    spark = start_session("local[2,4]")
    print("READY", flush=True)
    print(f"START {job['name']}", flush=True)
    outcome = run_job(spark, base, job, build=builder(target))
    print(f"DONE {job['name']} {outcome['outcome']}", flush=True)
    spark.stop()
    print_result(outcome)


if __name__ == "__main__":
    main(sys.argv[1])
