"""Partially finished jobs on real local Spark (FLIP-147, issue 14 item 4, issue 19 item
6): a source whose input ends finishes in its own epoch and is not run again, downstream
gets end_input for that input once in the job's life, checkpoints record fully finished
vertices, and a restart skips them; a source subtask whose splits run out finishes alone
while its sibling goes on, and downstream ends its input once both finished."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import partial_jobs
import pytest
import unbounded_jobs
from partial_jobs import (
    EpochRecorder,
    build,
    build_lanes,
    lanes_reference,
    one_pass,
)
from pyspark import cloudpickle
from unbounded_jobs import committed_rows, wait_for_epochs

from flintlock.core.api.triggers import EpochTrigger

pytestmark = pytest.mark.slow
cloudpickle.register_pickle_by_value(partial_jobs)  # workers cannot import tests/
cloudpickle.register_pickle_by_value(unbounded_jobs)  # partial_jobs' keyed function

ENDS = {"operator_end_input", "operator_finish", "function_finish"}
MAX = 2**63 - 1


def ends_of(recorder: EpochRecorder, vertex: str) -> dict[str, list[tuple[Any, ...]]]:
    """Per subtask of ``vertex``: its end_input and finish calls, each with its epoch."""
    return {
        task: [call for call in calls if call[0] in ENDS]
        for task, calls in recorder.by_task.items()
        if task.rsplit("#", 1)[0] == vertex
    }


def epochs_of(recorder: EpochRecorder, vertex: str) -> set[int]:
    """The epochs in which any subtask of ``vertex`` had any call recorded."""
    return {
        call[-1]
        for task, calls in recorder.by_task.items()
        if task.rsplit("#", 1)[0] == vertex
        for call in calls
    }


def check_output(base: str) -> None:
    """The union of committed output equals the plain-Python one-pass reference."""
    rows = committed_rows(base)
    reference_rows, reference_totals = one_pass()
    assert sorted((r["input"], r["id"]) for r in rows if r["id"] >= 0) == reference_rows
    timers = sorted((r["k"], r["input"], r["total"]) for r in rows if r["id"] < 0)
    assert timers == reference_totals  # each key's timer fired once, after both ended


def metadata(base: str, checkpoint_id: int, job: str = "partial") -> dict[str, Any]:
    path = Path(base, "chk", job, "checkpoints", f"chk-{checkpoint_id}", "_metadata.json")
    return json.loads(path.read_text())


def test_a_short_source_finishes_in_its_own_epoch_and_is_not_run_again(
    spark: Any, tmp_path: Path
) -> None:
    base = str(tmp_path)
    recorder = EpochRecorder()
    result = build(spark, base, [recorder]).execute("partial", trigger=EpochTrigger.available_now())
    assert (result.status, result.epochs) == ("FINISHED", 10)
    # the short source: lifecycle calls in epochs 1 and 2 only, finish in 2
    assert epochs_of(recorder, "short") == {1, 2}
    assert ends_of(recorder, "short") == {
        f"short#{i}": [("operator_finish", "short", 2)] for i in (0, 1)
    }
    assert epochs_of(recorder, "relay") == {1, 2}
    assert ends_of(recorder, "relay") == {
        f"relay#{i}": [
            ("operator_end_input", "relay", 1, 2),
            ("operator_finish", "relay", 2),
            ("function_finish", "relay", 2),
        ]
        for i in (0, 1)
    }
    assert epochs_of(recorder, "long") == set(range(1, 11))
    # downstream: end_input(1) once when the short input ended, end_input(2) at the end
    assert ends_of(recorder, "sums -> files") == {
        f"sums -> files#{i}": [
            ("operator_end_input", "sums", 1, 2),
            ("operator_end_input", "sums", 2, 10),
            ("operator_finish", "sums", 10),
            ("function_finish", "sums", 10),
            ("operator_end_input", "files", 1, 10),
            ("operator_finish", "files", 10),
        ]
        for i in (0, 1)
    }
    final = metadata(base, 10)
    assert final["final"] is True  # the first checkpoint after every task finished
    assert final["finished_vertices"] == {
        "long": 10,
        "relay": 2,
        "short": 2,
        "sums -> files": 10,
    }
    short_acks = [a for a in final["acknowledgements"] if a["task_name"] == "short"]
    assert [(a["finished"], a["finished_at"]) for a in short_acks] == [(True, 2), (True, 2)]
    check_output(base)


def test_a_partially_finished_job_restores_with_the_finished_vertex_skipped(
    spark: Any, tmp_path: Path
) -> None:
    base = str(tmp_path)
    first = EpochRecorder()
    client = build(spark, base, [first]).execute_async("partial")
    wait_for_epochs(client, 3)
    savepoint = client.stop()  # no drain: the long input goes on after the restart
    stopped = client.result()
    assert stopped.status == "STOPPED" and stopped.epochs >= 3
    stopped_at = int(Path(savepoint).name.split("-")[1])  # savepoint-<N>-<hex>
    recorded = metadata(base, stopped_at)
    assert recorded["final"] is False
    assert recorded["finished_vertices"] == {"relay": 2, "short": 2}
    assert epochs_of(first, "short") == {1, 2}
    assert ends_of(first, "sums -> files") == {
        f"sums -> files#{i}": [("operator_end_input", "sums", 1, 2)] for i in (0, 1)
    }

    second = EpochRecorder()
    result = build(spark, base, [second]).execute("partial", trigger=EpochTrigger.available_now())
    assert result.status == "FINISHED"
    assert stopped.epochs + result.epochs == 10
    skipped = [t for t in second.by_task if t.startswith(("short#", "relay#"))]
    assert skipped == []  # fully finished vertices: no call at all
    # input 1 ended before the restart: its end_input is not called again
    last = stopped_at + result.epochs
    assert ends_of(second, "sums -> files") == {
        f"sums -> files#{i}": [
            ("operator_end_input", "sums", 2, last),
            ("operator_finish", "sums", last),
            ("function_finish", "sums", last),
            ("operator_end_input", "files", 1, last),
            ("operator_finish", "files", last),
        ]
        for i in (0, 1)
    }
    assert metadata(base, last)["finished_vertices"] == {
        "long": last,
        "relay": 2,
        "short": 2,
        "sums -> files": last,
    }
    check_output(base)


# ---- one source whose subtask 0 runs out after epoch 1, subtask 1 after epoch 5 ----

LANES = "lanes -> tag"
SUMS = "sums -> files"


def lane_epoch(epoch: int, finishes: bool) -> list[tuple[Any, ...]]:
    """Every call of one subtask of ``lanes -> tag`` in ``epoch``: one batch of its lane
    (its last id ``300 * epoch - 1`` for subtask 1, 298 for subtask 0's only epoch), then
    MAX_WATERMARK, end_input and finish only if its splits ran out in this epoch."""
    watermark = 297 if finishes and epoch == 1 else 300 * epoch - 2
    calls: list[tuple[Any, ...]] = [
        ("state", "DEPLOYING"),
        ("task", "set_initial_state"),
        ("task", "load_chain"),
        ("state", "INITIALIZING"),
        ("task", "setup"),
        ("operator_setup", "lanes"),
        ("operator_setup", "tag"),
        ("function_set_runtime_context", "tag"),
        ("task", "task_init"),
        ("task", "initialize_state"),
        ("operator_initialize_state", "lanes"),
        ("operator_initialize_state", "tag"),
        ("task", "open"),
        ("operator_open", "tag"),
        ("function_open", "tag"),
        ("operator_open", "lanes"),
        ("state", "RUNNING"),
        ("task", "notify_restored"),
    ]
    if epoch > 1:
        calls += [
            ("operator_notify_checkpoint_complete", "tag", epoch - 1),
            ("operator_notify_checkpoint_complete", "lanes", epoch - 1),
        ]
    calls += [
        ("task", "run"),
        ("operator_process_batch", "tag"),
        ("operator_process_watermark", "tag", watermark),
    ]
    if finishes:
        calls += [
            ("operator_process_watermark", "lanes", MAX),
            ("operator_process_watermark", "tag", MAX),
            ("task", "finish"),
            ("operator_finish", "lanes"),
            ("operator_end_input", "tag", 1),
            ("operator_finish", "tag"),
            ("function_finish", "tag"),
        ]
    calls += [
        ("task", "snapshot"),
        ("operator_snapshot_state", "tag", epoch),
        ("operator_snapshot_state", "lanes", epoch),
        ("task", "close"),
        ("operator_close", "lanes"),
        ("operator_close", "tag"),
        ("function_close", "tag"),
        ("task", "timer_shutdown"),
        ("task", "task_cleanup"),
        ("task", "common_cleanup"),
        ("state", "FINISHED"),
    ]
    return [(*call, epoch) for call in calls]


def check_downstream_ends(recorder: EpochRecorder, epochs: set[int]) -> None:
    """Each subtask of ``sums -> files`` ran in ``epochs``; its input ended once, in epoch
    5, after the last source subtask finished: MAX_WATERMARK (never before), end_input(1),
    finish; the finished channel of subtask 0 held back nothing before."""
    for subtask in (0, 1):
        calls = recorder.by_task[f"{SUMS}#{subtask}"]
        assert {call[-1] for call in calls} == epochs
        ends = [
            call
            for call in calls
            if call[0] in ENDS or (call[0] == "operator_process_watermark" and call[2] == MAX)
        ]
        assert ends == [
            ("operator_process_watermark", "sums", MAX, 5),
            ("operator_process_watermark", "files", MAX, 5),
            ("operator_end_input", "sums", 1, 5),
            ("operator_finish", "sums", 5),
            ("function_finish", "sums", 5),
            ("operator_end_input", "files", 1, 5),
            ("operator_finish", "files", 5),
        ]
        watermarks = [c[2:] for c in calls if c[:2] == ("operator_process_watermark", "sums")]
        assert watermarks[-1] == (MAX, 5) and all(w < 300 * e for w, e in watermarks[:-1])


def check_final_checkpoint(base: str) -> None:
    """Checkpoint 5 is the final one: it records both subtasks of the source finished,
    subtask 0 in checkpoint 1, and the output is the plain-Python reference, row by row."""
    final = metadata(base, 5, "lanes")
    assert final["final"] is True
    assert final["finished_vertices"] == {LANES: 5, SUMS: 5}
    assert final["finished_subtasks"] == {LANES: {"0": 1, "1": 5}, SUMS: {"0": 5, "1": 5}}
    acks = sorted(
        (a["subtask_index"], a["finished"], a["finished_at"])
        for a in final["acknowledgements"]
        if a["task_name"] == LANES
    )
    assert acks == [(0, True, 1), (1, True, 5)]
    rows = sorted((r["k"], r["id"], r["total"]) for r in committed_rows(base))
    assert rows == lanes_reference()


def test_a_source_subtask_whose_splits_run_out_finishes_alone_while_its_sibling_goes_on(
    spark: Any, tmp_path: Path
) -> None:
    base = str(tmp_path)
    recorder = EpochRecorder()
    result = build_lanes(spark, base, [recorder]).execute(
        "lanes", trigger=EpochTrigger.available_now()
    )
    assert (result.status, result.epochs) == ("FINISHED", 5)
    # subtask 0: one epoch, finished in it; no call at all in epochs 2 to 5
    assert recorder.by_task[f"{LANES}#0"] == lane_epoch(1, finishes=True)
    # subtask 1: five epochs, a checkpoint without finish in each but the last
    assert recorder.by_task[f"{LANES}#1"] == [
        call for epoch in range(1, 6) for call in lane_epoch(epoch, finishes=epoch == 5)
    ]
    check_downstream_ends(recorder, {1, 2, 3, 4, 5})
    check_final_checkpoint(base)


def test_a_finished_source_subtask_stays_finished_after_a_restart(
    spark: Any, tmp_path: Path
) -> None:
    base = str(tmp_path)
    first = EpochRecorder()
    once = build_lanes(spark, base, [first]).execute("lanes", trigger=EpochTrigger.once())
    assert (once.status, once.epochs) == ("STOPPED", 1)
    assert first.by_task[f"{LANES}#0"] == lane_epoch(1, finishes=True)
    assert first.by_task[f"{LANES}#1"] == lane_epoch(1, finishes=False)
    recorded = metadata(base, 1, "lanes")
    assert (recorded["finished_vertices"], recorded["finished_subtasks"]) == ({}, {LANES: {"0": 1}})

    second = EpochRecorder()
    result = build_lanes(spark, base, [second]).execute(
        "lanes", trigger=EpochTrigger.available_now()
    )
    assert (result.status, result.epochs) == ("FINISHED", 4)
    assert f"{LANES}#0" not in second.by_task  # restored as finished: no call at all
    assert second.by_task[f"{LANES}#1"] == [
        call for epoch in range(2, 6) for call in lane_epoch(epoch, finishes=epoch == 5)
    ]
    check_downstream_ends(second, {2, 3, 4, 5})
    check_final_checkpoint(base)
