"""Which S3 requests W4's job makes, by operation and key pattern (issue 34): the job of
``bench/w4_s3.py`` with every request going through the counting proxy of the tests
(tests/s3_faults.py) in front of moto's server, so a cut in requests can be checked.

    python bench/s3_requests.py [--sink files|delta|iceberg] [--rows 1000000]
                                [--per-checkpoint 100000] [--top 40]

Prints the job's seconds and epochs, requests per operation, and the most frequent
(operation, key pattern) pairs, where a pattern replaces numbers and hex ids by ``#``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from s3_commit import moto_server
from s3_faults import FaultInjectingProxy
from s3_server import S3Server
from timing import local_session
from w4_s3 import S3Targets

IDS = re.compile(r"[0-9a-f]{8,}|\d+")


def pattern(path: str) -> str:
    """``path`` with its numbers and hex ids as ``#``."""
    return IDS.sub("#", path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sink", default="files")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--per-checkpoint", type=int, default=100_000)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--log", help="write every request, in order, to this file")
    args = parser.parse_args()
    spark = local_session(driver_memory="4g")
    scratch = tempfile.mkdtemp(prefix="flintlock-s3-requests-")
    try:
        with moto_server() as server, FaultInjectingProxy(server.endpoint) as proxy:
            host, _, port = proxy.endpoint.rpartition(":")
            targets = S3Targets(S3Server(host, int(port)), scratch, 0)
            targets.run(spark, args.rows, args.per_checkpoint, targets.sink(args.sink))  # warm
            proxy.requests.clear()
            proxy.counts.clear()
            proxy.targets.clear()
            proxy.upstream_seconds.clear()
            started = time.perf_counter()
            epochs = targets.run(spark, args.rows, args.per_checkpoint, targets.sink(args.sink))
            seconds = time.perf_counter() - started
            requests = list(proxy.requests)
            targets = list(proxy.targets)
            upstream = dict(proxy.upstream_seconds)
        if args.log:
            first = targets[0][2] if targets else 0.0
            lines = (f"{at - first:8.3f} {op} {unquote(t)}\n" for op, t, at in targets)
            Path(args.log).write_text("".join(lines))
        print(f"{args.sink}: {seconds:.2f} s, {epochs} epochs, {len(requests)} requests")
        for operation, count in proxy.counts.most_common():
            print(f"  {operation:<26}{count:>6}  {upstream.get(operation, 0.0):>7.2f} s")
        by_pattern = Counter((op, pattern(path)) for op, path in requests)
        listings = [unquote(target) for op, target, _ in targets if op == "ListObjects"]
        listed = Counter(pattern(target) for target in listings)
        for (operation, path), count in by_pattern.most_common(args.top):
            print(f"{count:>6}  {operation:<24} {path}")
        for target, count in listed.most_common(args.top):
            print(f"{count:>6}  ListObjects {target}")
    finally:
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
