"""The live page of `flintlock ui` against a running unbounded job on Spark, in a real
headless Chromium (Debian's, driven by playwright), checked as a person sees it (issue
38): the graph shows every vertex and edge of the job, a sleeping vertex busy and its
upstream backpressured, the checkpoints table gains rows as epochs complete with no
reload, and a savepoint and a stop sent from the page (each confirmed) reach the job and
show in the job folder and in the table."""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import test_report_in_browser
import unbounded_jobs
from playwright.sync_api import Page, sync_playwright
from pyspark import cloudpickle
from test_live_page_api import thousand_epochs
from test_report_in_browser import CHROMIUM, CHROMIUM_ARGS, FAILING_ID, failed_then_restored
from unbounded_jobs import SlowRunningSum, build, wait_for_epochs

from flintlock.core.api.triggers import EpochTrigger
from flintlock.report import job_report
from flintlock.ui.server import serve

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM),
        reason=f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)",
    ),
]
cloudpickle.register_pickle_by_value(unbounded_jobs)  # workers cannot import tests/
cloudpickle.register_pickle_by_value(test_report_in_browser)

JOB = "live job"
ROWS = "() => document.querySelectorAll('#checkpoints-table tbody tr').length"
KINDS = """() => Array.from(document.querySelectorAll('#checkpoints-table tbody tr'))
  .map((row) => row.cells[2].textContent)"""


def checkpoint_rows(page: Page) -> int:
    rows: int = page.evaluate(ROWS)
    return rows


def answered(page: Page, button: str, shot: Path) -> str:
    """Click ``button``, accept its confirmation, and wait for the job's answer."""
    asked: list[str] = []

    def accept(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.once("dialog", accept)
    page.click(button)
    page.wait_for_function(
        "() => !document.getElementById('answer').textContent.startsWith('waiting')"
        " && document.getElementById('answer').textContent !== ''",
        timeout=180_000,
    )
    page.screenshot(path=str(shot))
    assert asked and JOB in asked[0]  # the page asked first
    answer: str = page.inner_text("#answer")
    return answer


def test_the_live_page_follows_a_running_job_and_sends_its_requests(
    spark: Any, tmp_path: Path
) -> None:
    base = str(tmp_path)
    # the keyed vertex sleeps 0.1 s a row: busy, where the source is not
    client = build(spark, base, per_epoch=20, function=SlowRunningSum()).execute_async(JOB)
    try:
        wait_for_epochs(client, 1)
        graph = job_report(JOB, checkpoint_dir=f"{base}/chk")
        with serve(f"{base}/chk", port=0) as read_only:  # the default: no requests
            request = urllib.request.Request(
                f"{read_only.url}api/jobs/{JOB.replace(' ', '%20')}/savepoint", method="POST"
            )
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=30)
            assert refused.value.code == 403
            assert "--control" in json.loads(refused.value.read())["error"]
        with serve(f"{base}/chk", port=0, control=True) as server, sync_playwright() as driver:
            assert server.url.startswith("http://127.0.0.1:")  # loopback unless told
            browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1200, "height": 900})
                page.goto(f"{server.url}#job={JOB.replace(' ', '%20')}")
                page.wait_for_function(f"{ROWS} >= 1", timeout=60_000)
                page.evaluate("() => { window.loadedOnce = true; }")  # gone on a reload
                assert page.inner_text("#jobs-table tbody tr td:nth-child(2)") == "RUNNING"

                # the graph: every vertex and edge of the job, as its report has them
                drawn = page.evaluate(
                    """() => ({
                      vertices: Array.from(document.querySelectorAll('#graph g.vertex'))
                        .map((g) => [Number(g.dataset.vertex), g.textContent]),
                      edges: Array.from(document.querySelectorAll('#graph g.edge'))
                        .map((g) => [Number(g.dataset.source), Number(g.dataset.target),
                                     g.textContent])})"""
                )
                assert sorted(v for v, _ in drawn["vertices"]) == sorted(
                    v.id for v in graph.vertices
                )
                for vertex_id, text in drawn["vertices"]:
                    vertex = next(v for v in graph.vertices if v.id == vertex_id)
                    assert f"parallelism {vertex.parallelism}" in text
                assert sorted((s, t) for s, t, _ in drawn["edges"]) == sorted(
                    (e.source, e.target) for e in graph.edges
                )
                assert all(label for _, _, label in drawn["edges"])  # its partitioner
                assert graph.edges  # a keyed exchange: the graph has an edge to draw

                # busy ms per second: the sleeping vertex is busy, its upstream is not
                page.wait_for_function(
                    "() => document.querySelectorAll('#graph g.vertex[data-busy]').length === 2",
                    timeout=60_000,
                )
                busy = dict(
                    page.evaluate(
                        """() => Array.from(document.querySelectorAll('#graph g.vertex'))
                          .map((g) => [g.dataset.name, Number(g.dataset.busy)])"""
                    )
                )
                slow = next(b for name, b in busy.items() if name.startswith("keyed_process"))
                source = next(b for name, b in busy.items() if name.startswith("source:"))
                assert slow > 5 * source, (
                    busy
                )  # both over the same epoch: 2 s of sleep against a few ms
                # ... and the source, done with the epoch in a few ms, waits for it: it is
                # backpressured, where the sleeping vertex (nothing downstream) is not
                held = dict(
                    page.evaluate(
                        """() => Array.from(document.querySelectorAll('#graph g.vertex'))
                          .map((g) => [g.dataset.name, Number(g.dataset.backpressured)])"""
                    )
                )
                waited = next(b for name, b in held.items() if name.startswith("source:"))
                slowed = next(b for name, b in held.items() if name.startswith("keyed_process"))
                assert waited > 250 and waited > 5 * source and slowed == 0, (held, busy)

                # new checkpoints arrive as rows, without a reload
                seen = checkpoint_rows(page)
                page.wait_for_function(f"{ROWS} >= {seen + 2}", timeout=180_000)
                assert page.evaluate("() => window.loadedOnce === true")
                drawn = page.evaluate(
                    """() => ({
                      rows: (document.querySelector('#checkpoints .pager span')
                             ?.textContent.split(' of ')[1]
                             ?? document.querySelectorAll('#checkpoints-table tbody tr').length),
                      lines: Array.from(document.querySelectorAll('#throughput polyline'))
                        .map((l) => [l.dataset.series, l.getAttribute('points')
                                     .split(' ').length])})"""
                )
                # records out per second: a line per vertex, a point per epoch shown
                assert sorted(name for name, _ in drawn["lines"]) == sorted(
                    v.name for v in graph.vertices
                )
                epochs = min(int(drawn["rows"]), 100)  # the charts draw the newest 100
                assert all(points == epochs for _, points in drawn["lines"]), drawn
                page.screenshot(path=str(tmp_path / "live-page.png"), full_page=True)
                # each checkpoint's commit of the job's one sink, and how long it took
                committed = [row[6] for row in page.evaluate(CELLS, "checkpoints")]
                assert all(re.fullmatch(r"files \d+ ms", cell) for cell in committed), committed

                # a checkpoint's subtasks: their figures, acknowledgements and timeline
                page.click("#checkpoints-table a.chk >> nth=-1")  # the oldest shown
                subtasks = sum(v.parallelism for v in graph.vertices)
                page.wait_for_function(
                    "() => document.querySelectorAll('#checkpoint-detail-table tbody tr')"
                    f".length === {subtasks}",
                    timeout=60_000,
                )
                detail = page.evaluate(CELLS, "checkpoint-detail")
                assert sorted((row[0], row[1]) for row in detail) == sorted(
                    (v.name, str(i)) for v in graph.vertices for i in range(v.parallelism)
                )
                assert all(float(row[7]) > 0 for row in detail)  # each acknowledged, when
                timeline = page.evaluate(
                    """() => Array.from(document.querySelectorAll('#timeline g.subtask'))
                      .map((g) => Array.from(g.querySelectorAll('rect.phase'))
                        .map((r) => r.dataset.phase))"""
                )
                assert len(timeline) == subtasks
                assert all({"open", "run", "snapshot"} <= set(phases) for phases in timeline)
                page.screenshot(path=str(tmp_path / "checkpoint.png"), full_page=True)
                wide = "() => document.querySelector('#timeline svg').width.baseVal.value"
                width = page.evaluate(wide)
                page.select_option("#zoom", "4")  # zoomed in: wider, with a scroll bar
                page.wait_for_function(f"() => ({wide})() > 2 * {width}", timeout=60_000)
                page.screenshot(path=str(tmp_path / "zoomed.png"), full_page=True)

                # a savepoint from the page: in the job folder and in the table
                answer = answered(page, "#do-savepoint", tmp_path / "savepoint.png")
                assert answer.startswith("savepoint: "), answer
                savepoint = answer.removeprefix("savepoint: ")
                assert Path(savepoint, "_metadata.json").is_file()
                assert savepoint.startswith(f"{base}/chk/")  # in the job's folder
                page.wait_for_function(f"({KINDS})().includes('savepoint')", timeout=60_000)

                # a stop from the page: the job ends with its savepoint
                answer = answered(page, "#do-stop", tmp_path / "stopped.png")
                assert answer.startswith("savepoint: "), answer
                result = client.result(timeout=180)
                assert result.status == "STOPPED"
                assert result.savepoint_path == answer.removeprefix("savepoint: ")
                page.wait_for_function(
                    "() => document.querySelector('#jobs-table tbody tr td:nth-child(2)')"
                    ".textContent === 'STOPPED'",
                    timeout=60_000,
                )
                assert page.evaluate("() => window.loadedOnce === true")
            finally:
                browser.close()
    finally:
        if client.is_running():
            client.stop()
            client.result(timeout=180)
    shots = [
        tmp_path / name for name in ("live-page.png", "checkpoint.png", "zoomed.png", "stopped.png")
    ]
    assert all(shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for shot in shots)


CELLS = """(table) => Array.from(document.querySelectorAll(`#${table}-table tbody tr`))
  .map((row) => Array.from(row.cells).map((cell) => cell.textContent))"""


def test_the_live_page_shows_a_failure_with_its_phase_and_cause(spark: Any, tmp_path: Path) -> None:
    """A run that failed in epoch 2 and the run restored after it: the failure's task,
    subtask, operator, phase, checkpoint and cause, and which run restored what."""
    base = str(tmp_path)
    failed_then_restored(spark, base)
    report = job_report("report job", checkpoint_dir=f"{base}/chk")
    (failure,) = report.failures
    first, second = (run.run_id for run in report.runs)
    with serve(f"{base}/chk/report%20job", port=0) as server, sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(f"{server.url}#job=report%20job")
            page.wait_for_function(
                "() => document.querySelectorAll('#failures-table tbody tr').length === 1",
                timeout=60_000,
            )
            failures = page.evaluate(CELLS, "failures")
            runs = page.evaluate(CELLS, "runs")
            jobs = page.evaluate(CELLS, "jobs")
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
        finally:
            browser.close()
    (row,) = failures
    assert row[0] == first and row[2] == "LifecycleError"
    assert row[3:8] == [
        "keyed_process -> files",
        str(failure.subtask_index),
        "keyed_process",
        "run",
        "2",
    ]
    assert f"ValueError: injected: id {FAILING_ID} in epoch 2" in row[8]
    assert [r[0] for r in runs] == [second, first]  # newest first
    assert runs[0][2] == "1"  # restored from chk-1
    assert runs[1][4] == "LifecycleError in chk-2 (keyed_process, run)"
    assert [(j[0], j[1]) for j in jobs] == [("report job", "FINISHED")]  # its folder only


def test_execute_serves_the_jobs_page_while_it_runs(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``execute(ui_port=0)`` prints the page's address and serves it while epochs run
    (read from the driver's own progress callback); the page stays for the process, shows
    the job's end, and the process's next job takes it over."""
    base = str(tmp_path)
    seen: list[tuple[str, Any]] = []

    def progress(figures: dict[str, Any]) -> None:
        if seen:
            return
        printed = capsys.readouterr().err
        found = re.search(r"flintlock ui: (http://127\.0\.0\.1:\d+/)#job=paged%20job", printed)
        assert found is not None, printed
        with urllib.request.urlopen(f"{found.group(1)}api/jobs", timeout=30) as answer:
            seen.append((found.group(1), json.loads(answer.read())))

    result = build(spark, base, end=900).execute(
        "paged job", trigger=EpochTrigger.available_now(), progress=progress, ui_port=0
    )
    assert result.status == "FINISHED" and result.epochs == 3
    ((url, jobs),) = seen
    assert [(job["job_name"], job["status"]) for job in jobs["jobs"]] == [("paged job", "RUNNING")]
    assert jobs["control"] is False  # a job's own page only reads
    with urllib.request.urlopen(f"{url}api/jobs", timeout=30) as answer:
        after = json.loads(answer.read())["jobs"]
    assert [(job["job_name"], job["status"]) for job in after] == [("paged job", "FINISHED")]
    build(spark, f"{base}/next", end=300).execute(
        "next job", trigger=EpochTrigger.available_now(), progress=False, ui_port=0
    )
    printed = capsys.readouterr().err  # the same server, now showing the next job
    assert f"flintlock ui: {url}#job=next%20job" in printed
    with urllib.request.urlopen(f"{url}api/jobs", timeout=30) as answer:
        shown = json.loads(answer.read())
    assert [job["job_name"] for job in shown["jobs"]] == ["next job"]
    assert shown["checkpoint_dir"] == f"{base}/next/chk"  # its own checkpoint directory


def test_a_thousand_epochs_show_a_page_of_checkpoints_at_a_time(tmp_path: Path) -> None:
    """1,000 epochs (the log keeps the newest 500; no Spark: as the driver logs them): the
    checkpoints table shows 25, newest first, and its pager goes through the rest."""
    thousand_epochs(tmp_path / "chk")
    with serve(str(tmp_path / "chk"), port=0) as server, sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(f"{server.url}#job=sums")
            page.wait_for_function(f"{ROWS} === 25", timeout=60_000)
            first = page.evaluate(CELLS, "checkpoints")
            pager = page.locator("#checkpoints .pager")
            shown = [pager.locator("span").inner_text()]
            pager.get_by_role("button", name="older").click()
            page.wait_for_function(
                "() => document.querySelector('#checkpoints-table tbody tr td').textContent"
                " === '975'",
                timeout=60_000,
            )
            shown.append(pager.locator("span").inner_text())
            polled = page.inner_text("#updated")  # after the next poll: the page shown stays
            page.wait_for_function(
                f"() => document.getElementById('updated').textContent !== {polled!r}",
                timeout=60_000,
            )
            second = page.evaluate(CELLS, "checkpoints")
            page.screenshot(path=str(tmp_path / "thousand.png"))
        finally:
            browser.close()
    assert [row[0] for row in first] == [str(c) for c in range(1000, 975, -1)]
    assert [row[0] for row in second] == [str(c) for c in range(975, 950, -1)]
    assert shown == ["rows 1-25 of 500", "rows 26-50 of 500"]
