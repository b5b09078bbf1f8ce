"""With task retries, a failed attempt's output is neither lost nor duplicated."""

from __future__ import annotations

from pathlib import Path

import pytest
from job_scripts import run_script

SCRIPT = Path(__file__).with_name("retry_jobs.py")


@pytest.fixture(scope="module")
def retried(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[object]]]:
    base = tmp_path_factory.mktemp("retries")
    return run_script(SCRIPT, base)


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
