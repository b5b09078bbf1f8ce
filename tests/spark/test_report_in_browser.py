"""The HTML run report of a job that failed and was restored at another parallelism, and
of a long job written by its run log, rendered in a real headless Chromium (Debian's,
driven by playwright) and checked as a person sees it (issues 22 and 32)."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest
import unbounded_jobs
from playwright.sync_api import sync_playwright
from pyspark import cloudpickle
from test_report_model import completed, folder_at, graph, plan, write_two_runs
from unbounded_jobs import RunningSumUntilTheEnd, build

from flintlock import FileSink, MapFunction, StreamExecutionEnvironment
from flintlock.core.api.triggers import EpochTrigger
from flintlock.core.errors import LifecycleError
from flintlock.core.job.run_log import RunLog
from flintlock.report import job_report, write_report

pytestmark = pytest.mark.slow
cloudpickle.register_pickle_by_value(unbounded_jobs)  # workers cannot import tests/

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
FAILING_ID = 450
"""In epoch 2 (ids 300..599 at 300 rows per epoch)."""


class FailsOnceInEpochTwo(RunningSumUntilTheEnd):
    """The running sum, raising once at ``FAILING_ID`` (a marker file remembers it)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        if value["id"] == FAILING_ID and not os.path.exists(self.marker):
            Path(self.marker).write_text("failed once")
            raise ValueError(f"injected: id {FAILING_ID} in epoch 2")
        super().process_element(value, ctx, out)


def failed_then_restored(spark: Any, base: str) -> None:
    """600 ids in 2 epochs: the first run (parallelism 2) fails in epoch 2; the second,
    at parallelism 3, continues from chk-1 (rescaled) and finishes (chk-2, the final
    checkpoint)."""
    marker = f"{base}/failed-once"
    job = "report job"
    with pytest.raises(LifecycleError) as failure:
        build(spark, base, end=600, function=FailsOnceInEpochTwo(marker)).execute(
            job, trigger=EpochTrigger.available_now()
        )
    assert (failure.value.report.operator, failure.value.report.phase) == ("keyed_process", "run")
    restarted = build(spark, base, end=600, function=FailsOnceInEpochTwo(marker), parallelism=3)
    result = restarted.execute(job, trigger=EpochTrigger.available_now())
    assert (result.status, result.epochs) == ("FINISHED", 1)


def test_the_report_of_a_failed_and_restored_job_in_a_real_browser(
    spark: Any, tmp_path: Path
) -> None:
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)")
    base = str(tmp_path)
    failed_then_restored(spark, base)
    page_path = tmp_path / "report.html"
    report = write_report("report job", str(page_path), checkpoint_dir=f"{base}/chk")
    vertices = ["source:sequence", "keyed_process -> files"]
    assert [v.name for v in report.vertices] == vertices
    screenshot = tmp_path / "report.png"
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            seen = render(browser, page_path, screenshot)
            probe = tmp_path / "probe.html"  # the request check itself catches a fetch
            probe.write_text('<img src="http://flintlock.invalid/x.png"><p>probe</p>')
            probe_requests = render(browser, probe, tmp_path / "probe.png")["requests"]
        finally:
            browser.close()
    assert seen["requests"] == [page_path.as_uri()]  # the page itself, nothing else
    assert probe_requests == [probe.as_uri(), "http://flintlock.invalid/x.png"]
    assert seen["vertex_cells"] == [[name, "2 (run 1), 3 (run 2)"] for name in vertices]
    for operator in ("source:sequence", "keyed_process", "files"):
        assert operator in seen["graph_text"], f"{operator} not drawn in the graph"
    assert seen["graph_text"].count("parallelism 2 (run 1), 3 (run 2)") == 2  # each vertex
    first, second = (run.run_id for run in report.runs)
    assert seen["run_rows"] == [
        ["1", first, "-", "chk-1", "failed in chk-2: keyed_process, run"],
        ["2", second, "chk-1", "chk-2", "-"],  # restored from chk-1
    ]
    assert seen["failed_label"] == {"text": "failed", "on_top": True, "overlaps": []}
    assert seen["epoch_rows"] == [
        ["chk-1", first, "checkpoint"],
        ["chk-2", second, "checkpoint (final)"],
    ]
    assert seen["failure_rows"] == [
        [
            "chk-2",
            "keyed_process -> files",
            "keyed_process",
            "run",
            f"ValueError: injected: id {FAILING_ID} in epoch 2",
        ]
    ]
    recorded = recorded_watermarks(tmp_path / "chk")
    if recorded:  # the epochs' figures carry watermarks once metrics are taken
        assert seen["watermarks"] == recorded
    else:
        assert seen["watermarks"].startswith("This job has no event time")
    assert seen["gantt_labels"] == 2 * 2 + 2 * 3  # a row per subtask: chk-1 at 2, chk-2 at 3
    data = screenshot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000


SHOWN_ROWS = """(table) => Array.from(document.querySelectorAll(`#${table} tbody tr`))
  .filter((row) => row.getClientRects().length > 0).map((row) => row.cells[0].textContent)"""
"""The first cell of each row of a table that the browser lays out (not hidden)."""


def test_a_long_report_pages_its_tables_and_shows_the_failed_label(tmp_path: Path) -> None:
    """60 epochs (no Spark: the run log as the driver writes it): the epochs and phases
    tables show 25 rows at a time and the pager's buttons move through all of them; the
    "failed" label of run A's chk-2 is not covered by run B's chk-2 bar."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)")
    folder = folder_at(tmp_path / "chk")
    write_two_runs(folder)  # run A: chk-1, fails in chk-2; run B: chk-2, chk-3
    log = RunLog(folder, graph())
    for checkpoint_id in range(4, 61):
        checkpoint = completed(checkpoint_id, "runB", [1, 1, 1, 1])
        log.record_epoch(plan("runB", checkpoint_id, checkpoint_id - 1), checkpoint, {})
    path = tmp_path / "report.html"
    write_report(folder.path, str(path))
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            requests: list[str] = []
            page.on("request", lambda request: requests.append(request.url))
            page.route("**/*", block_the_network)
            page.goto(path.as_uri())
            page.wait_for_load_state("load")
            pager = page.locator("#epochs").locator("xpath=preceding-sibling::div[1]")
            seen = [(page.evaluate(SHOWN_ROWS, "epochs"), pager.locator("span").inner_text())]
            assert pager.get_by_role("button", name="previous").is_disabled()
            for button in ("next", "last", "show all", "first"):
                pager.get_by_role("button", name=button).click()
                seen.append(
                    (page.evaluate(SHOWN_ROWS, "epochs"), pager.locator("span").inner_text())
                )
            assert pager.get_by_role("button", name="previous").is_disabled()
            phases = page.locator("#phases").locator("xpath=preceding-sibling::div[1]")
            phases_status = phases.locator("span").inner_text()
            label = failed_label(page, 2)
            screenshot = page.screenshot(full_page=True)
        finally:
            browser.close()
    chk = [f"chk-{n}" for n in range(1, 61)]
    assert (
        seen
        == [
            (chk[:25], "rows 1-25 of 60"),
            (chk[25:50], "rows 26-50 of 60"),  # next
            (chk[50:], "rows 51-60 of 60"),  # last
            (chk, "all 60 rows"),  # show all
            (chk[:25], "rows 1-25 of 60"),  # first
        ]
    )
    assert phases_status == "rows 1-25 of 240"  # 60 epochs x 4 subtasks
    assert label == {"text": "failed", "on_top": True, "overlaps": []}
    assert requests == [path.as_uri()]  # the pager is the page's own script
    assert screenshot[:8] == b"\x89PNG\r\n\x1a\n"


class OpensOnceBadly(MapFunction):
    """Fails in open on its first run (a marker file remembers it); then doubles."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def open(self) -> None:
        if not os.path.exists(self.marker):
            Path(self.marker).write_text("failed once")
            raise OSError("injected: the lookup table is not there yet")

    def map(self, value: dict[str, Any]) -> dict[str, Any]:
        return {"v": 2 * value["v"]}


def test_a_bounded_job_that_failed_in_open_then_ran_reports_both_runs(
    spark: Any, tmp_path: Path
) -> None:
    def run() -> Any:
        env = StreamExecutionEnvironment(parallelism=2, spark=spark, checkpoint_dir=str(tmp_path))
        rows = env.from_collection([{"v": v} for v in range(10)])
        doubled = rows.map(OpensOnceBadly(str(tmp_path / "marker")), name="double")
        doubled.sink_to(FileSink(str(tmp_path / "out")), name="files")
        return env.execute("bounded report")

    with pytest.raises(LifecycleError):
        run()
    run()
    report = job_report("bounded report", checkpoint_dir=str(tmp_path))
    failed, finished = report.runs
    assert (failed.checkpoints, failed.failure.operator, failed.failure.phase) == (
        [],
        "double",
        "open",
    )
    assert (finished.checkpoints, finished.failure, report.status) == ([1], None, "FINISHED")
    (epoch,) = report.epochs
    assert (epoch.final, epoch.rows) == (True, 10)
    spans = [s for s in report.phases if s.subtask_index == 0 and "double" in s.task_name]
    assert [s.phase for s in spans] == [
        "setup",
        "initialize_state",
        "open",
        "run",
        "finish",
        "snapshot",
        "close",
    ]
    assert all(a.end <= b.start for a, b in itertools.pairwise(spans))
    assert [(v.name, v.parallelism) for v in report.vertices] == [
        ("source:collection -> double -> files", 2)  # one chain
    ]
    (metadata,) = tmp_path.glob("*/checkpoints/chk-1/_metadata.json")
    graph = json.loads(metadata.read_text())["graph"]  # the checkpoint keeps the graph too
    assert graph == {
        "vertices": [
            {
                "id": 0,
                "name": "source:collection -> double -> files",
                "operators": ["source:collection", "double", "files"],
                "task_type": "source",
                "parallelism": 2,
                "stage": 0,
            }
        ],
        "edges": [],
    }


def recorded_watermarks(checkpoint_dir: Path) -> list[list[str]]:
    """What the run log's epoch files recorded as watermarks, as the page must show them."""
    rows = []
    for path in sorted(checkpoint_dir.glob("*/_report/epochs/*.json")):
        entry = json.loads(path.read_text())
        for vertex, value in (entry["figures"].get("watermarks") or {}).items():
            if value is None:
                text = "-"
            elif value == 2**63 - 1:
                text = "end of input (MAX_WATERMARK)"
            else:
                text = f"{value:,}"
            rows.append([f"chk-{entry['checkpoint_id']}", vertex, text])
    return rows if any(row[2] != "-" for row in rows) else []


def block_the_network(route: Any) -> None:
    """Let the page's own file through; abort every other request (all are recorded)."""
    if route.request.url.startswith("file:"):
        route.continue_()
    else:
        route.abort()


def render(browser: Any, path: Path, screenshot: Path) -> dict[str, Any]:
    """Open ``path`` with every network request blocked and recorded; what is visible."""
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.route("**/*", block_the_network)
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    page.screenshot(path=str(screenshot), full_page=True)
    if not page.locator("#vertices").count():
        return {"requests": requests}

    def visible_rows(table: str, columns: list[int]) -> list[list[str]]:
        rows = page.locator(f"#{table} tbody tr")
        assert rows.first.is_visible()
        return [
            [rows.nth(i).locator("td").nth(c).inner_text() for c in columns]
            for i in range(rows.count())
        ]

    graph = page.locator(".chart").first
    assert graph.is_visible()
    labels = page.locator("svg text", has_text="chk-")
    return {
        "requests": requests,
        "vertex_cells": visible_rows("vertices", [0, 3]),
        "run_rows": visible_rows("runs", [0, 1, 3, 4, 5]),
        "graph_text": graph.inner_text(),
        "epoch_rows": visible_rows("epochs", [0, 1, 2]),
        "failure_rows": visible_rows("failures", [2, 3, 5, 6, 7]),
        "watermarks": visible_rows("watermarks", [0, 1, 2])
        if page.locator("#watermarks").count()
        else page.get_by_text("no event time").inner_text(),
        "gantt_labels": sum(labels.nth(i).is_visible() for i in range(labels.count())),
        "failed_label": failed_label(page, 2),
    }


def failed_label(page: Any, checkpoint_id: int) -> dict[str, Any]:
    """The epochs chart's "failed" label of ``checkpoint_id`` as a person sees it: its
    text, whether the point at its centre is the label itself (nothing painted over it),
    and which other drawn elements of the chart its box overlaps (the figure's own
    background aside)."""
    return page.evaluate(
        """(id) => {
          const label = document.querySelector(`#failed-chk-${id} text`);
          label.scrollIntoView({block: "center"});
          const box = label.getBoundingClientRect();
          const hit = document.elementFromPoint(box.x + box.width / 2, box.y + box.height / 2);
          const overlaps = Array.from(label.ownerSVGElement.querySelectorAll("path, use, text"))
            .filter((e) => e !== label && !e.closest("#patch_1"))
            .filter((e) => {
              const r = e.getBoundingClientRect();
              return r.width + r.height > 0 && r.left < box.right && box.left < r.right
                && r.top < box.bottom && box.top < r.bottom;
            })
            .map((e) => (e.closest("g[id]") || e).id);
          return {text: label.textContent, on_top: hit === label, overlaps: overlaps};
        }""",
        checkpoint_id,
    )
