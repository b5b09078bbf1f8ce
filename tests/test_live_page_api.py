"""The live page's JSON, from the real server on loopback (no Spark: job folders as the
driver writes them): the jobs of a checkpoint directory, a job's report and status as
``flintlock report`` and ``flintlock status`` read them, the refusals (an unknown job,
requests on a read-only page), and ``execute(ui_port=...)``'s checks before Spark."""

from __future__ import annotations

import dataclasses
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from test_report_model import completed, folder_at, graph, plan, write_two_runs

from flintlock import GraphError, StreamExecutionEnvironment
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.job.run_log import KEPT_EPOCHS, RunLog
from flintlock.errors import JobControlError
from flintlock.report import job_report
from flintlock.ui.app import Target
from flintlock.ui.server import UiServer, serve
from flintlock.ui.state import SHOWN, finite


def fetched(url: str, method: str = "GET") -> tuple[int, Any]:
    """The status and JSON body of one request."""
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_api_serves_the_jobs_and_a_jobs_report_from_its_folder(tmp_path: Path) -> None:
    folder = folder_at(tmp_path / "chk")
    write_two_runs(folder)
    with serve(str(tmp_path / "chk"), port=0) as server:
        status, jobs = fetched(f"{server.url}api/jobs")
        assert status == 200 and jobs["control"] is False
        assert [job["job_name"] for job in jobs["jobs"]] == ["sums"]
        status, report = fetched(f"{server.url}api/jobs/sums")
        assert status == 200
        whole = finite(dataclasses.asdict(job_report("sums", str(tmp_path / "chk"))))
        for part in (*SHOWN, "failures"):  # as the report has them
            assert report[part] == json.loads(json.dumps(whole[part])), part
        assert "phases" not in report  # not drawn: not sent (a long job has thousands)
        latest = max(whole["metrics"], default=None)
        vertices = whole["metrics"].get(latest, {}) if latest is not None else {}
        assert report["metrics"] == {"checkpoint_id": latest, "vertices": vertices}
        assert report["live"] == {"status": "UNKNOWN", "error": "job 'sums' has not run here yet"}
        assert [e["checkpoint_id"] for e in report["epochs"]] == [1, 2, 3]
        assert report["failures"][0]["phase"] == "run"  # run A's failure, with its phase
        assert fetched(f"{server.url}api/jobs/other")[0] == 404
        status, refused = fetched(f"{server.url}api/jobs/sums/stop", method="POST")
        assert status == 403 and "--control" in refused["error"]
        with urllib.request.urlopen(server.url, timeout=30) as page:
            html = page.read().decode()
        assert "<script>" in html and "http" not in html.split("<script>", 1)[1].replace(
            "http://www.w3.org/2000/svg", ""
        )  # the page fetches nothing but its own JSON


def test_a_job_folder_serves_only_its_job(tmp_path: Path) -> None:
    write_two_runs(folder_at(tmp_path / "chk"))
    folder_at(tmp_path / "chk").storage.write_json(f"{tmp_path}/chk/other/_job.json", {})
    with serve(str(tmp_path / "chk" / "sums"), port=0) as server:
        status, jobs = fetched(f"{server.url}api/jobs")
    assert status == 200 and [job["job_name"] for job in jobs["jobs"]] == ["sums"]


@pytest.mark.parametrize("port", [-1, 70000, "8081", True])
def test_a_ui_port_that_is_no_port_is_refused_before_spark_starts(port: Any) -> None:
    env = StreamExecutionEnvironment(parallelism=1)
    env.from_collection([{"x": 1}]).print()
    with pytest.raises(GraphError, match="ui_port must be a port number"):
        env.execute("job", ui_port=port)


def thousand_epochs(base: Path) -> None:
    """Job 'sums' in ``base``: two runs, then run B up to chk-1000, as its driver logs them."""
    folder = folder_at(base)
    write_two_runs(folder)
    log = RunLog(folder, graph())
    for checkpoint_id in range(4, 1001):
        checkpoint = completed(checkpoint_id, "runB", [1, 1, 1, 1])
        log.record_epoch(plan("runB", checkpoint_id, checkpoint_id - 1), checkpoint, {})


@pytest.mark.slow
def test_a_job_with_a_thousand_epochs_is_read_once_per_entry(tmp_path: Path) -> None:
    """The page asks each second: the run log's entries (written once) are read once, new
    ones as they come, and pruned ones leave its answer."""
    thousand_epochs(tmp_path / "chk")
    epochs = sorted((tmp_path / "chk" / "sums" / "_report" / "epochs").iterdir())
    assert len(epochs) == KEPT_EPOCHS  # the log keeps the newest 500
    with serve(str(tmp_path / "chk"), port=0) as server:
        status, first = fetched(f"{server.url}api/jobs/sums")
        assert status == 200 and len(first["epochs"]) == KEPT_EPOCHS
        assert first["epochs"][-1]["checkpoint_id"] == 1000
        newest = json.loads(epochs[-1].read_text())
        epochs[-1].write_text(json.dumps({**newest, "run_id": "changed on disk"}))
        epochs[0].unlink()  # as the log prunes its oldest entries
        status, second = fetched(f"{server.url}api/jobs/sums")
    assert status == 200
    assert second["epochs"][-1]["run_id"] == "runB"  # not read again: known since the first
    assert [e["checkpoint_id"] for e in second["epochs"]] == list(range(502, 1001))
    assert len(json.dumps(second)) < 400_000  # no phases: what the page draws


def test_the_page_never_makes_a_job_folder(tmp_path: Path) -> None:
    """A job's own page starts before its job made its folder: asking for the job reads
    and answers that it has not started, and creates nothing (a folder's identity is made
    by the job's first start only)."""
    storage = CheckpointStorage.from_uri(str(tmp_path / "chk"))
    with UiServer(Target(storage, "later"), port=0) as server:
        status, answer = fetched(f"{server.url}api/jobs/later")
        listed, jobs = fetched(f"{server.url}api/jobs")
    assert status == 409 and "job 'later' has not started in" in answer["error"]
    assert listed == 200 and jobs["jobs"] == []
    assert not (tmp_path / "chk").exists()


def test_with_control_on_a_request_without_the_pages_header_is_refused(tmp_path: Path) -> None:
    """Another web page the user has open can POST to loopback too, but not with a custom
    header (the browser would ask first, and the app allows no other origin): refused,
    and no request reaches the job's folder."""
    write_two_runs(folder_at(tmp_path / "chk"))
    with serve(str(tmp_path / "chk"), port=0, control=True) as server:
        status, refused = fetched(f"{server.url}api/jobs/sums/stop", method="POST")
    assert status == 403 and "X-Flintlock-Control" in refused["error"]
    assert not (tmp_path / "chk" / "sums" / "_control").exists()


def test_a_port_that_is_taken_is_an_error_naming_it(tmp_path: Path) -> None:
    write_two_runs(folder_at(tmp_path / "chk"))
    with serve(str(tmp_path / "chk"), port=0) as first:
        port = int(first.url.rsplit(":", 1)[1].rstrip("/"))
        with pytest.raises(JobControlError, match=f"cannot listen on 127.0.0.1:{port}"):
            serve(str(tmp_path / "chk"), port=port)
        assert fetched(f"{first.url}api/jobs")[0] == 200  # the first one serves on
