"""With task retries, a failed attempt's output is neither lost nor duplicated."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("retry_jobs.py")


@pytest.fixture(scope="module")
def retried(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[object]]]:
    base = tmp_path_factory.mktemp("retries")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(base)], capture_output=True, text=True, timeout=600
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-5000:]
    return json.loads(lines[-1].removeprefix("RESULT "))


def test_sink_attempt_failing_after_its_staging_file_was_flushed(retried: dict) -> None:
    assert "sink-died-after-flush" in retried["markers"]  # the first attempt really failed
    result = retried["sink_fails"]
    assert result["v"] == list(range(3000))  # every row exactly once
    assert result["leftover_staging"] == []  # the failed attempt aborted its file


def test_upstream_attempt_failing_after_it_emitted(retried: dict) -> None:
    assert "upstream-died-after-emitting" in retried["markers"]
    result = retried["upstream_fails"]
    assert result["v"] == list(range(3000))
    assert result["leftover_staging"] == []
