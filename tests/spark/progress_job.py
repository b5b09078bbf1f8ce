"""A small unbounded job for the progress tests: ``EPOCHS`` (argv[2], default 4) epochs of
``PER_EPOCH`` ids, the even ones kept, an epoch every ``INTERVAL`` seconds, into Parquet
files under argv[1]."""

from __future__ import annotations

import sys

from flintlock import EpochTrigger, FileSink, StreamExecutionEnvironment

PER_EPOCH, INTERVAL = 100, 0.3
VERTEX = "source:sequence -> evens -> files"
"""The job's one vertex (a chain): 100 ids in, 50 out per epoch."""

if __name__ == "__main__":
    base = sys.argv[1]
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    env = StreamExecutionEnvironment(parallelism=2, checkpoint_dir=f"{base}/checkpoints")
    numbers = env.from_sequence(end=epochs * PER_EPOCH, rows_per_epoch=PER_EPOCH)
    evens = numbers.filter(lambda row: row["id"] % 2 == 0, name="evens")
    evens.sink_to(FileSink(f"{base}/out"), name="files")
    env.execute("progress", trigger=EpochTrigger.processing_time(INTERVAL))
