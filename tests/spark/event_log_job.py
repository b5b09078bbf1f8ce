"""A job with ``storage_options`` on a session whose Spark event log is on (its own
process: the event log is set when the SparkContext starts). Runs the job to its end,
then reads the event log back: is the secret in it, plain or inside the base64 plan of
any local property (Spark's event log keeps those as they are)? Prints one RESULT line.

    python event_log_job.py <base>   (base/config.json: endpoint, secret, folder)
"""

from __future__ import annotations

import base64
import binascii
import glob
import json
import sys
from pathlib import Path
from typing import Any

import zstandard
from job_scripts import print_result

from flintlock import StreamExecutionEnvironment
from flintlock.sinks.files import FileSink


def session(event_log: Path) -> Any:
    from pyspark.sql import SparkSession

    event_log.mkdir(parents=True, exist_ok=True)
    builder = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", str(event_log))
    )
    return builder.getOrCreate()


def job(spark: Any, config: dict[str, Any], name: str) -> StreamExecutionEnvironment:
    folder, options = config["folder"], config["options"]
    env = StreamExecutionEnvironment(
        parallelism=2,
        spark=spark,
        checkpoint_dir=f"s3://{config['bucket']}/{folder}/{name}/chk",
        storage_options=options,
    )
    env.from_sequence(end=200, rows_per_epoch=100).sink_to(
        FileSink(f"s3://{config['bucket']}/{folder}/{name}/out")
    )
    return env


def secret_in_log(event_log: Path, secret: bytes) -> dict[str, Any]:
    """Where the secret shows in the event log's text and its local properties' values."""
    text = b""
    for path in glob.glob(f"{event_log}/**/events_*", recursive=True):
        with open(path, "rb") as raw:  # Spark writes zstd frames one after another
            reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
            text += reader.read()
    found = {"plain": secret in text, "in_properties": [], "events": text.count(b"\n")}
    for line in text.splitlines():
        event = json.loads(line)
        for key, value in (event.get("Properties") or {}).items():
            for part in str(value).split("."):
                try:
                    if secret in base64.b64decode(part, validate=True):
                        found["in_properties"].append(key)
                except (binascii.Error, ValueError):
                    continue
    return found


def main(base: Path) -> None:
    config = json.loads((base / "config.json").read_text())
    secret = config["options"]["aws_secret_access_key"].encode()
    spark = session(base / "events")
    status = job(spark, config, "logged").execute("logged").status
    spark.stop()
    print_result({"status": status, "found": secret_in_log(base / "events", secret)})


if __name__ == "__main__":
    main(Path(sys.argv[1]))
