"""The live page and Spark's UI link each other (issue 38): ``flintlock run --spark-ui
--ui 0`` has each epoch's Spark job description link the job's page (through a redirect
in Spark's UI, which draws only root-relative links), and the page's checkpoints table
link each epoch's Spark jobs and stages; both followed in a real headless Chromium."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import sync_playwright
from test_progress_on_spark import FLINTLOCK, JOB, free_port
from test_report_in_browser import CHROMIUM, CHROMIUM_ARGS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM),
        reason=f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)",
    ),
]

EPOCHS = 400
"""More than the test needs: the job runs (and Spark's UI answers) until the test ends."""


def addresses(process: subprocess.Popen[str], lines: list[str]) -> tuple[str, str]:
    """The job's page and Spark's UI, as ``flintlock run`` prints them on stderr."""
    assert process.stderr is not None
    threading.Thread(target=lambda: lines.extend(process.stderr or ()), daemon=True).start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        text = "".join(lines)
        page = re.search(r"flintlock ui: (http://127\.0\.0\.1:\d+/)#job=progress", text)
        spark = re.search(r"flintlock: Spark UI at (http://\S+)", text)
        if page and spark:
            return page[1], spark[1]
        assert process.poll() is None, text
        time.sleep(0.2)
    raise AssertionError(f"no addresses printed: {''.join(lines)}")


def epochs_in_spark(page: str, at_least: int) -> list[dict[str, Any]]:
    """The job's epochs from its page's API once ``at_least`` of them are logged."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{page}api/jobs/progress", timeout=30) as answer:
                epochs: list[dict[str, Any]] = json.loads(answer.read())["epochs"]
        except urllib.error.HTTPError as error:  # 409: its folder is not made yet
            assert error.code == 409, error
            epochs = []
        if len(epochs) >= at_least:
            return epochs
        time.sleep(0.3)
    raise AssertionError(f"fewer than {at_least} epochs logged in 120 s")


def test_spark_ui_and_the_live_page_link_each_other(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [FLINTLOCK, "run", "--spark-ui", "--ui", "0", JOB, str(tmp_path), str(EPOCHS)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_SUBMIT_ARGS": f"--conf spark.ui.port={free_port()} pyspark-shell",
        },
    )
    lines: list[str] = []
    try:
        page, spark_ui = addresses(process, lines)
        epochs = epochs_in_spark(page, 2)
        for epoch in epochs:  # each epoch: its one Spark job, a stage or more, Spark's UI
            assert epoch["spark"]["ui"] == spark_ui
            assert len(epoch["spark"]["jobs"]) == 1 and epoch["spark"]["stages"], epoch
        jobs = [epoch["spark"]["jobs"][0] for epoch in epochs]
        assert jobs == sorted(set(jobs))  # one Spark job per epoch, in their order
        with sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                tab = browser.new_page(viewport={"width": 1400, "height": 900})
                # Spark's jobs page: each epoch's description links the job's page there
                tab.goto(f"{spark_ui}/jobs/", timeout=120_000)
                link = tab.locator('a[href="/flintlock/progress"]').first
                link.wait_for(timeout=120_000)
                described = tab.locator("span.description-input", has=link).first.inner_text()
                assert re.fullmatch(
                    r"flintlock job 'progress' epoch \d+ chk-\d+ \(run \w+\) flintlock page",
                    described.strip(),
                ), described
                link.click()  # Spark's UI sends the browser on to the page
                tab.wait_for_url(f"{page}#job=progress", timeout=60_000)
                tab.wait_for_function(
                    "() => document.getElementById('job-name').textContent === 'progress'",
                    timeout=60_000,
                )
                tab.screenshot(path=str(tmp_path / "page-from-spark.png"), full_page=True)
                # the page's checkpoints table: each epoch's Spark job and stages there
                tab.wait_for_function(
                    "() => document.querySelectorAll('#checkpoints-table a.spark').length >= 2",
                    timeout=60_000,
                )
                row = tab.locator("#checkpoints-table tbody tr").last  # the oldest shown
                checkpoint = int(row.locator("td").first.inner_text())
                logged = next(e for e in epochs if e["checkpoint_id"] == checkpoint)
                hrefs = row.locator("a.spark").evaluate_all("(as) => as.map((a) => a.href)")
                stage = logged["spark"]["stages"][0]
                assert hrefs[:2] == [
                    f"{spark_ui}/jobs/job/?id={logged['spark']['jobs'][0]}",
                    f"{spark_ui}/stages/stage/?id={stage}&attempt=0",
                ]
                row.locator("a.spark").nth(1).click()
                tab.wait_for_selector(f"text=Details for Stage {stage}", timeout=120_000)
                tab.screenshot(path=str(tmp_path / "stage-from-page.png"), full_page=True)
            finally:
                browser.close()
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)  # a stop as a person's Ctrl-C
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
