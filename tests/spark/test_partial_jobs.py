"""Partially finished jobs on real local Spark (FLIP-147, issue 14 item 4): a source
whose input ends finishes in its own epoch and is not run again, downstream gets
end_input for that input once in the job's life, checkpoints record fully finished
vertices, and a restart skips them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import partial_jobs
import pytest
from partial_jobs import EpochRecorder, build, committed_rows, one_pass
from pyspark import cloudpickle
from unbounded_jobs import wait_for_epochs

from flintlock.core.epoch_triggers import EpochTrigger

pytestmark = pytest.mark.slow
cloudpickle.register_pickle_by_value(partial_jobs)  # workers cannot import tests/

ENDS = {"operator_end_input", "operator_finish", "function_finish"}


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


def metadata(base: str, checkpoint_id: int) -> dict[str, Any]:
    path = Path(base, "chk", "partial", "checkpoints", f"chk-{checkpoint_id}", "_metadata.json")
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
