"""The W1 job runs over Spark Connect with the same result: only the DataFrame API is used."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("connect_job.py")
N = 200_000


def expected_w1(n: int) -> tuple[int, float]:
    count, total = 0, 0.0
    for i in range(n):
        if (i * 2654435761) % 10000 % 2 == 0:
            count += 1
            total += (i % 1000) / 10.0 * 2
    return count, total


def test_w1_over_spark_connect(tmp_path: Path) -> None:
    pytest.importorskip("grpc", reason="needs pyspark[connect] (the test extra installs it)")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path), str(N)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-5000:]
    result = json.loads(lines[-1].removeprefix("RESULT "))
    assert "connect" in result["session"]
    count, total = expected_w1(N)
    for mode in ("batch", "record"):
        assert result[mode][0] == count
        assert result[mode][1] == pytest.approx(total, rel=1e-12)
