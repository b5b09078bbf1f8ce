"""The run report (the live page saved with its data) of a job that failed and was
restored at another parallelism, and of a long job written by its run log, opened from
its file in a real headless Chromium (Debian's, driven by playwright) with the network
blocked, and checked as a person sees it (issues 22, 32 and 38)."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import unbounded_jobs
from playwright.sync_api import sync_playwright
from pyspark import cloudpickle
from test_report_model import completed, folder_at, graph, plan, sized_graph, write_two_runs
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


CELLS = """(table) => Array.from(document.querySelectorAll(`#${table}-table tbody tr`))
  .map((row) => Array.from(row.cells).map((cell) => cell.textContent))"""
TIMELINE_ROWS = "document.querySelectorAll('#timeline g.subtask').length"


def opened_offline(browser: Any, path: Path) -> tuple[Any, list[str]]:
    """``path`` opened with every network request blocked and recorded, once drawn."""
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.route("**/*", block_the_network)
    page.goto(path.as_uri())
    page.wait_for_function(
        "() => document.querySelectorAll('#checkpoints-table tbody tr').length > 0",
        timeout=60_000,
    )
    return page, requests


@contextlib.contextmanager
def saved_report(folder: str, tmp_path: Path) -> Iterator[tuple[Any, list[str], Path]]:
    """The report of the job in ``folder`` written to ``tmp_path`` and opened offline in
    Chromium: the page, the requests it made, the file."""
    path = tmp_path / "report.html"
    write_report(folder, str(path))
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page, requests = opened_offline(browser, path)
            yield page, requests, path
        finally:
            browser.close()


def test_the_report_of_a_failed_and_restored_job_in_a_real_browser(
    spark: Any, tmp_path: Path
) -> None:
    """The saved page (the live page with its data in it) of a job whose first run failed
    in epoch 2 and whose second ran at another parallelism, opened from its file with the
    network blocked: graph, runs, checkpoints, failures, and each checkpoint's subtasks."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)")
    base = str(tmp_path)
    failed_then_restored(spark, base)
    page_path = tmp_path / "report.html"
    report = write_report("report job", str(page_path), checkpoint_dir=f"{base}/chk")
    vertices = ["source:sequence", "keyed_process -> files"]
    assert [v.name for v in report.vertices] == vertices
    first, second = (run.run_id for run in report.runs)
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page, requests = opened_offline(browser, page_path)
            graph = page.evaluate(
                """() => Array.from(document.querySelectorAll('#graph g.vertex'))
                  .map((g) => [g.dataset.name, g.textContent])"""
            )
            seen = {name: page.evaluate(CELLS, name) for name in ("checkpoints", "runs")}
            failures = page.evaluate(CELLS, "failures")
            lag = page.inner_text("#lag")
            updated = page.inner_text("#updated")
            shown = page.inner_text("#job-name")
            timelines = []
            for checkpoint_id in (1, 2):  # a click shows the checkpoint's subtasks
                page.click(f"#checkpoints-table a.chk >> text='{checkpoint_id}'")
                page.wait_for_function(
                    f"() => document.getElementById('checkpoint-id').textContent === "
                    f"'{checkpoint_id}' && {TIMELINE_ROWS} > 0",
                    timeout=60_000,
                )
                timelines.append(page.evaluate(f"() => {TIMELINE_ROWS}"))
            page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
            assert page.locator("#controls").is_hidden()  # a saved page sends nothing
        finally:
            browser.close()
    assert requests == [page_path.as_uri()]  # the page itself, nothing else
    assert shown == "report job" and updated.startswith("saved ")
    assert [name for name, _ in graph] == vertices
    for _, text in graph:  # each vertex: its parallelism in each run
        assert "parallelism 2 (run 1), 3 (run 2)" in text, text
    assert [row[:3] for row in seen["checkpoints"]] == [
        ["2", second, "checkpoint (final)"],  # newest first
        ["1", first, "checkpoint"],
    ]
    assert [[row[0], *row[2:]] for row in seen["runs"]] == [
        [second, "1", "1", ""],  # restored from chk-1
        [first, "", "1", "LifecycleError in chk-2 (keyed_process, run)"],
    ]
    ((run, _, error, task, _, operator, phase, checkpoint, message),) = failures
    assert (run, error, task, operator, phase, checkpoint) == (
        first,
        "LifecycleError",
        "keyed_process -> files",
        "keyed_process",
        "run",
        "2",
    )
    assert f"ValueError: injected: id {FAILING_ID} in epoch 2" in message
    if not recorded_watermarks(tmp_path / "chk"):
        assert lag == "This job has no event time: no watermark to draw"
    assert timelines == [2 + 2, 3 + 3]  # a row per subtask: chk-1 at 2, chk-2 at 3
    data = (tmp_path / "report.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000


def test_a_long_report_pages_its_checkpoints(tmp_path: Path) -> None:
    """60 epochs (no Spark: the run log as the driver writes it): the saved page's
    checkpoints table shows 25 at a time, newest first, and its pager goes through all."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)")
    folder = folder_at(tmp_path / "chk")
    write_two_runs(folder)  # run A: chk-1, fails in chk-2; run B: chk-2, chk-3
    log = RunLog(folder, graph())
    for checkpoint_id in range(4, 61):
        checkpoint = completed(checkpoint_id, "runB", [1, 1, 1, 1])
        log.record_epoch(plan("runB", checkpoint_id, checkpoint_id - 1), checkpoint, {})
    with saved_report(folder.path, tmp_path) as (page, requests, path):
        pager = page.locator("#checkpoints .pager")
        seen = [([r[0] for r in page.evaluate(CELLS, "checkpoints")], pager.inner_text())]
        for button in ("older", "older", "newer"):
            pager.get_by_role("button", name=button).click()
            seen.append(([r[0] for r in page.evaluate(CELLS, "checkpoints")], pager.inner_text()))
        metrics = page.inner_text("#metrics")
        screenshot = page.screenshot(full_page=True)
    chk = [str(n) for n in range(60, 0, -1)]
    assert [rows for rows, _ in seen] == [chk[:25], chk[25:50], chk[50:], chk[25:50]]
    assert [text.split("older")[-1].strip() for _, text in seen] == [
        "rows 1-25 of 60",
        "rows 26-50 of 60",
        "rows 51-60 of 60",
        "rows 26-50 of 60",
    ]
    assert metrics == "no metrics recorded"  # the log's acknowledgements carry none
    assert requests == [path.as_uri()]  # the pager is the page's own script
    assert screenshot[:8] == b"\x89PNG\r\n\x1a\n"


def test_runs_of_another_graph_are_named_under_the_newest(tmp_path: Path) -> None:
    """Runs 1-3 of numbers -> sum -> out (run 3 rescaled), run 4 with a filter added: the
    page draws run 4's graph and names the runs that had the other one."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)")
    folder = folder_at(tmp_path / "chk")
    for number, parallelism in enumerate((2, 2, 4), 1):
        RunLog(folder, sized_graph(parallelism)).record_run(f"run{number}")
    log = RunLog(folder, sized_graph(4, with_filter=True))
    log.record_epoch(plan("run4", 1, None), completed(1, "run4", [1, 1, 1, 1]), {})
    with saved_report(folder.path, tmp_path) as (page, requests, path):
        names = page.evaluate(
            "() => Array.from(document.querySelectorAll('#graph g.vertex'))"
            ".map((g) => g.dataset.name)"
        )
        notes = page.locator("#graph p.shape").all_inner_texts()
    assert names == ["numbers", "sum -> big -> out"]
    assert notes == ["Runs 1, 2, 3 had another graph: numbers; sum -> out"]
    assert requests == [path.as_uri()]


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
