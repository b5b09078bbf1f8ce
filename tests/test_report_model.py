"""The run report without Spark or a browser: the phases a task records, what the run log
keeps in the job folder, the report read from it, the page and the CLI (issue 22, part 3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lifecycle_ops import Passthrough, batch

from flintlock.cli import main
from flintlock.core.checkpoint.coordinator import CheckpointCoordinator, CompletedCheckpoint
from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.snapshots import TaskAcknowledgement, TaskRestore
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.errors import LifecycleError
from flintlock.core.events import CheckpointBarrier
from flintlock.core.exchange.partitioners import hash_by
from flintlock.core.failure_report import FailureReport
from flintlock.core.job import run_log
from flintlock.core.job.run_log import RunLog, record_failure
from flintlock.core.plan.execution import ExecutionPlan
from flintlock.core.plan.graph import InputEdge, JobGraph, Transformation, build_job_graph
from flintlock.errors import CommitError
from flintlock.report import job_report
from flintlock.report.model import GANTT_PHASES
from flintlock.testing import OneInputHarness
from flintlock.ui.saved import DATA_ID, saved_documents, saved_page

INVOKE_ORDER = [
    "set_initial_state",
    "load_chain",
    "setup",
    "task_init",
    "initialize_state",
    "open",
    "notify_restored",
    "run",
    "snapshot",
    "close",
    "timer_shutdown",
    "task_cleanup",
    "common_cleanup",
]


def test_a_subtask_reports_each_phase_once_in_invoke_order_close_included() -> None:
    harness = OneInputHarness(Passthrough("a"), Passthrough("b"))
    harness.process_batch(batch(1, 2, 3))
    harness.checkpoint(1)
    assert len(harness.writer.acknowledgements) == 1  # acknowledged in snapshot, then closed
    reported = harness.writer.lifecycle_phases
    assert len(reported) == 1  # once, after close
    phases = reported[0]
    assert sorted(phases, key=lambda p: phases[p][0]) == INVOKE_ORDER
    ends = [phases[p] for p in INVOKE_ORDER]
    assert all(start <= end for start, end in ends)
    assert all(ends[i][1] <= ends[i + 1][0] for i in range(len(ends) - 1))


def test_the_final_checkpoint_records_finish() -> None:
    harness = OneInputHarness(Passthrough("a"))
    harness.process_batch(batch(1))
    harness.complete(1)
    phases = harness.writer.lifecycle_phases[0]
    assert phases["run"][1] <= phases["finish"][0] <= phases["finish"][1] <= phases["snapshot"][0]


def test_a_task_that_fails_in_close_reports_no_phases() -> None:
    harness = OneInputHarness(Passthrough("a", fail_in="close"))
    harness.process_batch(batch(1))
    with pytest.raises(LifecycleError):
        harness.checkpoint(1)
    # the acknowledgement left before close (on Spark the failed attempt's output is
    # dropped with it); the phase report, sent only after a clean close, never left
    assert len(harness.writer.acknowledgements) == 1
    assert harness.writer.lifecycle_phases == []


def graph() -> JobGraph:
    """source (2) -> hash -> sum -> sink (2): two vertices, one edge."""
    source = Transformation(0, "numbers", lambda: None, 2, is_source=True)
    summing = Transformation(1, "sum", lambda: None, 2, [InputEdge(0, 1, hash_by("k"))])
    sink = Transformation(2, "out", lambda: None, 2, [InputEdge(1, 1)], is_sink=True)
    return build_job_graph([source, summing, sink])


def acknowledgement(
    task: str, subtask: int, rows: int, size: int, start: float
) -> TaskAcknowledgement:
    """An acknowledgement as a subtask sends it (a real one, renamed and with figures)."""
    harness = OneInputHarness(
        Passthrough("op"), task_name=task, subtask_index=subtask, parallelism=2
    )
    harness.checkpoint(1)
    document = harness.writer.acknowledgements[0].to_json()
    reported = harness.writer.lifecycle_phases[0]  # as the driver joins them on Spark
    first = min(times[0] for times in reported.values())
    document["lifecycle_phases"] = {
        name: [start + t0 - first, start + t1 - first] for name, (t0, t1) in reported.items()
    }
    document.pop("metrics", None)  # each test says which metrics it records
    document = {**document, "records_in": rows, "records_out": rows, "size_bytes": size}
    return TaskAcknowledgement.from_json(document)


def folder_at(path: Path) -> JobFolder:
    folder = JobFolder(CheckpointStorage.from_uri(str(path)), "sums")
    folder.open()
    return folder


def completed(checkpoint_id: int, run_id: str, rows: list[int]) -> CompletedCheckpoint:
    acks = [
        acknowledgement(task, subtask, rows[i], 100 + i, 1000.0 + checkpoint_id)
        for i, (task, subtask) in enumerate(
            [("numbers", 0), ("numbers", 1), ("sum -> out", 0), ("sum -> out", 1)]
        )
    ]
    return CompletedCheckpoint(checkpoint_id, run_id, False, acks)


def plan(run_id: str, checkpoint_id: int, restored: int | None, final: bool = False) -> Any:
    """The epoch's plan as the run log reads it: run, barrier, what it restored."""
    restores = {(0, 0): TaskRestore(restored, [])} if restored else {}
    barrier = CheckpointBarrier(checkpoint_id, "checkpoint", final)
    return ExecutionPlan(
        "sums", run_id, checkpoint_id, barrier, "", 128, "hashmap", graph(), restores=restores
    )


def write_two_runs(folder: JobFolder) -> None:
    """Run A: chk-1, then a failure in chk-2; run B: chk-2 and chk-3 (final)."""
    first = RunLog(folder, graph())
    first.record_epoch(
        plan("runA", 1, None), completed(1, "runA", [3, 4, 5, 2]), {"kind": "checkpoint"}
    )
    report = FailureReport(
        job_name="sums",
        run_id="runA",
        checkpoint_id=2,
        task_name="sum -> out",
        task_type="one-input",
        subtask_index=1,
        parallelism=2,
        attempt_number=0,
        attempt_id=7,
        phase="run",
        cause_type="ValueError",
        cause_message="bad row",
        operator="sum",
        operator_method="process_element",
    )
    record_failure(folder, "runA", LifecycleError.from_report(report))
    second = RunLog(folder, graph())
    figures = {"kind": "checkpoint", "seconds": 0.25, "watermarks": {"numbers": 40}}
    second.record_epoch(plan("runB", 2, 1), completed(2, "runB", [1, 1, 1, 1]), figures)
    final = {"kind": "checkpoint", "final": True, "seconds": 0.5, "watermarks": {"numbers": 90}}
    second.record_epoch(plan("runB", 3, 2, True), completed(3, "runB", [2, 0, 1, 1]), final)


def test_the_report_reads_graph_epochs_phases_failures_from_the_job_folder(
    tmp_path: Path,
) -> None:
    folder = folder_at(tmp_path)
    write_two_runs(folder)
    report = job_report(folder.path)
    assert report.job_name == "sums"
    assert [(r.run_id, r.checkpoints, r.restored_from) for r in report.runs] == [
        ("runA", [1], None),
        ("runB", [2, 3], 1),
    ]
    assert report.runs[0].failure is report.failures[0] and report.runs[1].failure is None
    assert [(v.name, v.parallelism, v.task_type) for v in report.vertices] == [
        ("numbers", 2, "source"),
        ("sum -> out", 2, "one-input"),
    ]
    assert [(e.source, e.target, e.partitioner) for e in report.edges] == [(0, 1, "hash('k')")]
    assert [(e.checkpoint_id, e.run_id, e.final) for e in report.epochs] == [
        (1, "runA", False),
        (2, "runB", False),
        (3, "runB", True),
    ]
    # rows: what the source subtasks read; bytes: every subtask's snapshot
    assert [e.rows for e in report.epochs] == [3 + 4, 1 + 1, 2 + 0]
    assert [e.checkpoint_bytes for e in report.epochs] == [100 + 101 + 102 + 103] * 3
    assert report.epochs[0].records_in == {"numbers": 7, "sum -> out": 7}
    assert [e.watermarks for e in report.epochs] == [None, {"numbers": 40}, {"numbers": 90}]
    assert report.has_watermarks
    spans = [s for s in report.phases if (s.checkpoint_id, s.subtask_index) == (3, 1)]
    spans = [s for s in spans if s.task_name == "numbers"]
    assert [s.phase for s in spans] == [p for p in GANTT_PHASES if p != "finish"]
    assert all(s.start <= s.end for s in spans)
    (failure,) = report.failures
    assert (failure.task_name, failure.subtask_index, failure.operator, failure.phase) == (
        "sum -> out",
        1,
        "sum",
        "run",
    )
    assert (failure.checkpoint_id, failure.cause) == (2, "ValueError: bad row")


def test_a_run_that_failed_before_its_first_checkpoint_shows_its_graph_and_error(
    tmp_path: Path,
) -> None:
    folder = folder_at(tmp_path)
    RunLog(folder, graph()).record_run("r")
    record_failure(folder, "r", CommitError("the sink 'out' could not commit checkpoint 1"))
    report = job_report(folder.path)
    (run,) = report.runs
    assert (run.run_id, run.checkpoints, run.failure) == ("r", [], report.failures[0])
    assert (run.failure.error_type, run.failure.phase, run.failure.operator) == (
        "CommitError",
        None,
        None,
    )
    assert [v.name for v in report.vertices] == ["numbers", "sum -> out"]
    documents, _ = saved_documents(folder)
    (saved,) = documents["api/jobs/sums"]["failures"]
    assert saved["message"] == "the sink 'out' could not commit checkpoint 1"


def test_without_watermarks_or_metrics_the_saved_page_has_neither(tmp_path: Path) -> None:
    folder = folder_at(tmp_path)
    RunLog(folder, graph()).record_epoch(plan("r", 1, None), completed(1, "r", [1, 1, 1, 1]), {})
    report = job_report(folder.path)
    assert not report.has_watermarks and report.metrics == {}
    documents, _ = saved_documents(folder)
    job = documents["api/jobs/sums"]
    assert job["metrics"] == {"checkpoint_id": None, "vertices": {}}
    assert job["failures"] == [] and [e["watermarks"] for e in job["epochs"]] == [None]


def test_metrics_are_summed_per_vertex(tmp_path: Path) -> None:
    folder = folder_at(tmp_path)
    checkpoint = completed(1, "r", [1, 1, 1, 1])
    for i, ack in enumerate(checkpoint.acknowledgements):
        ack.metrics.update(
            {
                "numRecordsOut": 10 * (i + 1),
                "currentInputWatermark": 100 - i,
                "time": 1e9 + i,
                "operators": {"op": {"user": {"seen": i}}},
                "ok": True,
            }
        )
    RunLog(folder, graph()).record_epoch(plan("r", 1, None), checkpoint, {})
    assert job_report(folder.path).metrics == {  # subtasks 0, 1 are numbers; 2, 3 the sum
        1: {
            "numbers": {
                "numRecordsOut": 10.0 + 20.0,
                "currentInputWatermark": 99.0,  # the lowest
                "operators.op.user.seen": 0.0 + 1.0,
            },
            "sum -> out": {
                "numRecordsOut": 30.0 + 40.0,
                "currentInputWatermark": 97.0,
                "operators.op.user.seen": 2.0 + 3.0,
            },
        }
    }
    documents, _ = saved_documents(folder)  # the page's metrics: the latest epoch's
    assert documents["api/jobs/sums"]["metrics"] == {
        "checkpoint_id": 1,
        "vertices": job_report(folder.path).metrics[1],
    }


def test_watermarks_none_yet_and_the_end_of_input(tmp_path: Path) -> None:
    folder = folder_at(tmp_path)
    log = RunLog(folder, graph())
    log.record_epoch(
        plan("r", 1, None), completed(1, "r", [1] * 4), {"watermarks": {"numbers": None}}
    )
    assert not job_report(folder.path).has_watermarks
    ended = {"numbers": 2**63 - 1, "sum -> out": 1500}
    log.record_epoch(plan("r", 2, 1), completed(2, "r", [1] * 4), {"watermarks": ended})
    report = job_report(folder.path)
    assert report.has_watermarks
    documents, _ = saved_documents(folder)
    saved = [e["watermarks"] for e in documents["api/jobs/sums"]["epochs"]]
    assert saved == [{"numbers": None}, ended]


def test_the_saved_page_carries_every_document_it_draws_and_fetches_nothing(
    tmp_path: Path,
) -> None:
    folder = folder_at(tmp_path)
    write_two_runs(folder)
    page, report = saved_page(folder)
    for forbidden in ("<script src", "<link", "@import", "src=", "</script><"):
        assert forbidden not in page.split(f'id="{DATA_ID}">', 1)[1].split("</script>", 1)[0]
    assert "<script src" not in page and "<link" not in page
    data = json.loads(page.split(f'id="{DATA_ID}">', 1)[1].split("</script>", 1)[0])
    assert (data["job"], sorted(data["documents"])) == (
        "sums",
        ["api/jobs", "api/jobs/sums", *(f"api/jobs/sums/checkpoints/{c}" for c in (1, 2, 3))],
    )
    jobs = data["documents"]["api/jobs"]
    assert [j["job_name"] for j in jobs["jobs"]] == ["sums"] and jobs["control"] is False
    job = data["documents"]["api/jobs/sums"]
    assert [v["name"] for v in job["vertices"]] == [v.name for v in report.vertices]
    assert [e["checkpoint_id"] for e in job["epochs"]] == [1, 2, 3]
    detail = data["documents"]["api/jobs/sums/checkpoints/3"]
    assert [(s["task_name"], s["subtask_index"]) for s in detail["subtasks"]] == [
        ("numbers", 0),
        ("numbers", 1),
        ("sum -> out", 0),
        ("sum -> out", 1),
    ]


def test_text_in_the_data_cannot_end_its_script_block(tmp_path: Path) -> None:
    """A failure message holding ``</script>`` stays data: "<" is escaped in the block."""
    folder = folder_at(tmp_path)
    RunLog(folder, graph()).record_run("r")
    record_failure(folder, "r", CommitError("</script><script>alert(1)</script>"))
    page, _ = saved_page(folder)
    block = page.split(f'id="{DATA_ID}">', 1)[1].split("</script>", 1)[0]
    data = json.loads(block)
    (failure,) = data["documents"]["api/jobs/sums"]["failures"]
    assert failure["message"] == "</script><script>alert(1)</script>"


def test_only_the_newest_epochs_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_log, "KEPT_EPOCHS", 3)
    monkeypatch.setattr(run_log, "PRUNE_EVERY", 2)
    folder = folder_at(tmp_path)
    log = RunLog(folder, graph())
    for checkpoint_id in range(1, 8):
        log.record_epoch(
            plan("r", checkpoint_id, None), completed(checkpoint_id, "r", [1, 1, 1, 1]), {}
        )
    kept = [e.checkpoint_id for e in job_report(folder.path).epochs]
    assert kept == [4, 5, 6, 7]  # pruned to 3 at chk-6, then chk-7 written


def test_the_cli_writes_the_page_and_refuses_a_folder_that_is_no_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = folder_at(tmp_path / "chk")
    write_two_runs(folder)
    out = tmp_path / "report.html"
    assert main(["report", "sums", "--checkpoint-dir", str(tmp_path / "chk"), "-o", str(out)]) == 0
    assert "3 epochs, 1 failures" in capsys.readouterr().out
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert main(["report", str(tmp_path), "-o", str(out)]) == 1
    assert "is not a job folder" in capsys.readouterr().err


def test_a_graph_without_edges_and_the_arrow_table(tmp_path: Path) -> None:
    """A job that only has a source still gets its vertex drawn and listed."""
    folder = folder_at(tmp_path)
    only = build_job_graph([Transformation(0, "alone", lambda: None, 1, is_source=True)])
    RunLog(folder, only).record_epoch(plan("r", 1, None), completed(1, "r", [1, 1, 1, 1]), {})
    documents, _ = saved_documents(folder)
    job = documents["api/jobs/sums"]
    assert ([v["name"] for v in job["vertices"]], job["edges"]) == (["alone"], [])
    assert pa is not None


def test_with_no_run_log_the_graph_comes_from_the_latest_checkpoint(tmp_path: Path) -> None:
    """A job folder whose run log is gone still shows its graph: checkpoint metadata
    records it (``checkpoint_details``)."""
    folder = folder_at(tmp_path)
    details = {"graph": graph().to_json()}
    CheckpointCoordinator(folder).complete(1, "r", True, [], set(), details)
    report = job_report(folder.path)
    assert (report.runs, report.epochs) == ([], [])
    assert [(v.name, v.operators) for v in report.vertices] == [
        ("numbers", ["numbers"]),
        ("sum -> out", ["sum", "out"]),
    ]
    documents, _ = saved_documents(folder)
    assert documents["api/jobs/sums"]["epochs"] == []
    assert [v["name"] for v in documents["api/jobs/sums"]["vertices"]] == ["numbers", "sum -> out"]


def sized_graph(parallelism: int, with_filter: bool = False) -> JobGraph:
    """numbers -> hash -> sum -> out at ``parallelism``; optionally a filter after the sum
    (another shape of the job)."""
    source = Transformation(0, "numbers", lambda: None, parallelism, is_source=True)
    summing = Transformation(1, "sum", lambda: None, parallelism, [InputEdge(0, 1, hash_by("k"))])
    tail = [Transformation(2, "out", lambda: None, parallelism, [InputEdge(1, 1)], is_sink=True)]
    if with_filter:
        tail = [
            Transformation(2, "big", lambda: None, parallelism, [InputEdge(1, 1)]),
            Transformation(3, "out", lambda: None, parallelism, [InputEdge(2, 1)], is_sink=True),
        ]
    return build_job_graph([source, summing, *tail])


def test_a_restore_at_another_parallelism_shows_each_runs_parallelism(tmp_path: Path) -> None:
    """Runs 1 and 2 at parallelism 2, run 3 restored at 4: one graph, each vertex's
    parallelism per run; run 4 with a filter added: a second graph for its own shape."""
    folder = folder_at(tmp_path)
    for number, parallelism in enumerate((2, 2, 4), 1):
        RunLog(folder, sized_graph(parallelism)).record_run(f"run{number}")
    report = job_report(folder.path)
    (layout,) = report.layouts
    assert layout.runs == [1, 2, 3]
    assert [layout.parallelism_text(v) for v in layout.vertices] == ["2 (runs 1, 2), 4 (run 3)"] * 2
    assert [v.parallelism for v in report.vertices] == [4, 4]  # the newest run's
    documents, _ = saved_documents(folder)  # the page says it from the layouts
    (saved,) = documents["api/jobs/sums"]["layouts"]
    assert saved["parallelism"] == {"0": {"1": 2, "2": 2, "3": 4}, "1": {"1": 2, "2": 2, "3": 4}}

    RunLog(folder, sized_graph(4, with_filter=True)).record_run("run4")
    report = job_report(folder.path)
    assert [(layout.runs, [v.name for v in layout.vertices]) for layout in report.layouts] == [
        ([1, 2, 3], ["numbers", "sum -> out"]),
        ([4], ["numbers", "sum -> big -> out"]),  # the newest shape last: #vertices, #edges
    ]
    documents, _ = saved_documents(folder)
    assert [layout["runs"] for layout in documents["api/jobs/sums"]["layouts"]] == [[1, 2, 3], [4]]


def test_a_job_without_event_time_says_so_in_one_line(tmp_path: Path) -> None:
    """A bounded job without event time records "none yet" every epoch and MAX_WATERMARK
    at the end of its input: no chart, no table of "-", no watermark metric column."""
    folder = folder_at(tmp_path)
    log = RunLog(folder, graph())
    none_yet = {"numbers": None, "sum -> out": None}
    for checkpoint_id in range(1, 121):
        final = checkpoint_id == 120
        checkpoint = completed(checkpoint_id, "r", [1, 1, 1, 1])
        for ack in checkpoint.acknowledgements:
            ack.metrics.update({"numRecordsOut": 1, "currentInputWatermark": 2**63 - 1})
            if not final:
                ack.metrics.pop("currentInputWatermark")  # None: not numeric, not kept
        ended = dict.fromkeys(none_yet, 2**63 - 1)
        figures = {"final": final, "watermarks": ended if final else none_yet}
        log.record_epoch(plan("r", checkpoint_id, None, final), checkpoint, figures)
    report = job_report(folder.path)
    assert not report.has_watermarks
    out = {name: m["numRecordsOut"] for name, m in report.metrics[120].items()}
    assert out == {"numbers": 2.0, "sum -> out": 2.0}  # the end of input: no watermark drawn


def test_where_a_subtask_ran_is_no_metric_of_the_report() -> None:
    """A subtask's ``executor`` (id, host, pid) says where it ran: its pid summed over
    subtasks would be a figure of nothing."""
    from flintlock.core.metrics.subtask import executor_of_this_process
    from flintlock.report.model import metrics_of

    subtasks = [
        {
            "task_name": "map",
            "metrics": {"numRecordsIn": 3, "executor": executor_of_this_process()},
        }
        for _ in range(2)
    ]
    assert metrics_of({"subtasks": subtasks}) == {"map": {"numRecordsIn": 6.0}}
