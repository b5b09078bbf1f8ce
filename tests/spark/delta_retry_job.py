"""A DeltaSink job with task retries (``local[2,4]``) in its own process; prints JSON.

The first attempt of subtask 0 dies hard after closing its data files in the table's
folder (its Python worker exits: no abort runs), so the retried attempt writes them
again. Run by tests/spark/test_delta_sink.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import retry_jobs
from deltalake import DeltaTable
from job_scripts import print_result, start_session
from pyspark import cloudpickle
from retry_jobs import first_attempt_of, injected

from flintlock import DeltaSink, StreamExecutionEnvironment

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared reader
from delta_tables import read_delta

cloudpickle.register_pickle_by_value(retry_jobs)  # workers cannot import tests/


class DiesAfterClosingItsFiles(DeltaSink):
    """The first attempt of subtask 0 exits its worker once its files are closed."""

    def finish(self, transaction: Any) -> None:
        super().finish(transaction)
        if first_attempt_of(0) and transaction.files:
            injected("delta-writer-died")
            os._exit(1)


def main(base: str) -> None:
    os.environ["FLINTLOCK_TEST_MARKERS"] = base
    spark = start_session("local[2,4]")
    uri = f"{base}/table"
    env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=f"{base}/chk")
    rows = [{"k": i % 13, "v": i} for i in range(3000)]
    stream = env.from_collection(rows, batch_size=200).key_by("k").map(lambda r: r, name="keyed")
    stream.sink_to(DiesAfterClosingItsFiles(uri, partition_by=["k"]), name="out")
    env.execute("delta-retries")
    spark.stop()
    table = DeltaTable(uri)
    on_disk = sorted(str(p.relative_to(uri)) for p in Path(uri).rglob("*.parquet"))
    in_table = sorted(str(Path(p).relative_to(uri)) for p in table.file_uris())
    print_result(
        {
            "v": sorted(read_delta(uri).column("v").to_pylist()),
            "on_disk": on_disk,
            "in_table": in_table,
            "markers": sorted(n for n in os.listdir(base) if "died" in n),
        }
    )


if __name__ == "__main__":
    main(sys.argv[1])
