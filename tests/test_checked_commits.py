"""Committables carry what verifies them; damaged checkpoint files are refused by name;
the lifecycle points the trustworthy-jobs issue found wrong (harness level, no Spark)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from acknowledgements import acknowledgement
from lifecycle_ops import batch

from flintlock import OneInputStreamOperator, Source, SourceReader, TwoPhaseCommitSink
from flintlock.core.api.sink import CommitContext
from flintlock.core.checkpoint.coordinator import CheckpointCoordinator
from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.storage import CheckpointStorage, safe_name
from flintlock.errors import CheckpointError, CommittableError, JobIdentityError, SinkOutputError
from flintlock.operators.sink import TwoPhaseCommitSinkOperator
from flintlock.sinks.collect import CollectSink
from flintlock.sinks.files import FileSink
from flintlock.testing import OneInputHarness, SourceHarness

# ---- job names ----


def test_job_names_are_encoded_injectively() -> None:
    names = ["orders job", "orders/job", "orders_job", "orders%20job", ".", "..", "", "é"]
    encoded = [safe_name(name) for name in names]
    assert len(set(encoded)) == len(names)
    assert all("/" not in e and not e.startswith(".") and e for e in encoded)


def test_names_that_cannot_name_a_folder_are_refused(tmp_path: Path) -> None:
    storage = CheckpointStorage.from_uri(str(tmp_path))
    with pytest.raises(JobIdentityError, match="non-empty string"):
        JobFolder(storage, "")
    with pytest.raises(JobIdentityError, match="too long"):
        JobFolder(storage, "x" * 300)


# ---- checkpoint metadata ----


def completed(tmp_path: Path, job_name: str = "orders") -> CheckpointCoordinator:
    """A job folder with one completed (uncommitted) final checkpoint."""
    folder = JobFolder(CheckpointStorage.from_uri(str(tmp_path)), job_name)
    folder.open()
    coordinator = CheckpointCoordinator(folder)
    ack = acknowledgement("v", 0, 1)
    coordinator.complete(1, "run1", True, [ack], {("v", 0)})
    return coordinator


def test_a_completed_checkpoint_records_job_name_and_id(tmp_path: Path) -> None:
    coordinator = completed(tmp_path)
    document = json.loads((tmp_path / "orders/checkpoints/chk-1/_metadata.json").read_text())
    assert document["job_name"] == "orders"
    assert document["job_id"] == coordinator.folder.job_id
    latest = coordinator.latest()
    assert latest is not None and latest.final and latest.run_id == "run1"


def test_truncated_metadata_is_a_checkpoint_error_naming_the_file(tmp_path: Path) -> None:
    coordinator = completed(tmp_path)
    metadata = tmp_path / "orders/checkpoints/chk-1/_metadata.json"
    metadata.write_bytes(metadata.read_bytes()[:40])
    with pytest.raises(CheckpointError, match=f"{metadata}.*not valid JSON"):
        coordinator.latest()


def test_metadata_missing_a_field_is_a_checkpoint_error_naming_the_file(tmp_path: Path) -> None:
    coordinator = completed(tmp_path)
    metadata = tmp_path / "orders/checkpoints/chk-1/_metadata.json"
    document = json.loads(metadata.read_text())
    del document["acknowledgements"]
    metadata.write_text(json.dumps(document))
    with pytest.raises(CheckpointError, match=f"{metadata} is damaged.*acknowledgements"):
        coordinator.latest()


def test_a_stray_folder_among_checkpoints_is_named(tmp_path: Path) -> None:
    coordinator = completed(tmp_path)
    stray = tmp_path / "orders/checkpoints/chk-1.bak"
    stray.mkdir()
    with pytest.raises(CheckpointError, match=f"{stray} does not belong"):
        coordinator.latest()


def test_metadata_of_another_job_is_refused_naming_the_file(tmp_path: Path) -> None:
    completed(tmp_path, "hourly")
    nightly = completed(tmp_path, "nightly")
    theirs = tmp_path / "hourly/checkpoints/chk-1/_metadata.json"
    mine = tmp_path / "nightly/checkpoints/chk-2/_metadata.json"
    mine.parent.mkdir()
    mine.write_bytes(theirs.read_bytes())  # a folder copied from another job
    with pytest.raises(CheckpointError, match=f"{mine} belongs to job 'hourly'"):
        nightly.latest()


def test_a_job_folder_of_another_job_is_refused_naming_it(tmp_path: Path) -> None:
    completed(tmp_path, "hourly")
    (tmp_path / "hourly").rename(tmp_path / "nightly")  # copied under another job's name
    folder = JobFolder(CheckpointStorage.from_uri(str(tmp_path)), "nightly")
    with pytest.raises(CheckpointError, match=f"{tmp_path / 'nightly'} belongs to job 'hourly'"):
        folder.open()


def test_a_final_checkpoint_that_cannot_be_written_names_job_checkpoint_and_path(
    tmp_path: Path,
) -> None:
    folder = JobFolder(CheckpointStorage.from_uri(str(tmp_path)), "orders")
    folder.open()
    blocked = tmp_path / "orders/checkpoints/chk-1/_metadata.json"
    blocked.mkdir(parents=True)  # a folder where the metadata file must go
    ack = acknowledgement("v", 0, 1)
    with pytest.raises(CheckpointError, match=f"job 'orders': the final checkpoint 1 .*{blocked}"):
        CheckpointCoordinator(folder).complete(1, "run1", True, [ack], {("v", 0)})


# ---- verified committables ----


def staged_file_sink(tmp_path: Path) -> tuple[FileSink, OneInputHarness]:
    sink = FileSink(str(tmp_path / "out"))
    harness = OneInputHarness(TwoPhaseCommitSinkOperator(sink, name="files"))
    harness.process_batch(batch(*range(100)))
    harness.complete(checkpoint_id=1)
    return sink, harness


def test_file_committables_carry_size_and_rows(tmp_path: Path) -> None:
    _, harness = staged_file_sink(tmp_path)
    assert harness.acknowledgement is not None
    [file] = harness.acknowledgement.committables["files"]
    assert file["rows"] == 100
    assert file["bytes"] == Path(file["staging"]).stat().st_size


def test_a_truncated_staged_file_is_not_published(tmp_path: Path) -> None:
    sink, harness = staged_file_sink(tmp_path)
    assert harness.acknowledgement is not None
    [file] = harness.acknowledgement.committables["files"]
    staged = Path(file["staging"])
    staged.write_bytes(staged.read_bytes()[:-20])
    with pytest.raises(CommittableError, match=f"{staged} has .* bytes.*truncated") as caught:
        harness.commit(sink)
    assert "new_run=True" in str(caught.value)  # what the user can do, not "start again"
    assert sink.committed_files() == []


def test_a_lost_staged_file_is_reported_with_what_to_do(tmp_path: Path) -> None:
    sink, harness = staged_file_sink(tmp_path)
    assert harness.acknowledgement is not None
    [file] = harness.acknowledgement.committables["files"]
    Path(file["staging"]).unlink()
    with pytest.raises(CommittableError, match="missing and was never published") as caught:
        harness.commit(sink)
    assert "starting again will not change that" in str(caught.value)
    assert "mode='overwrite'" in str(caught.value)


def test_a_staged_file_with_other_rows_is_not_published(tmp_path: Path) -> None:
    sink, harness = staged_file_sink(tmp_path)
    assert harness.acknowledgement is not None
    [file] = harness.acknowledgement.committables["files"]
    file["rows"] = 99  # as if the committable and the file disagreed
    with pytest.raises(CommittableError, match="holds 100 rows, 99 were written"):
        harness.commit(sink)
    assert sink.committed_files() == []


def test_a_commit_after_the_files_were_published_is_checked_and_changes_nothing(
    tmp_path: Path,
) -> None:
    sink, harness = staged_file_sink(tmp_path)
    harness.commit(sink)
    harness.commit(sink)  # the driver died after the rename: the commit runs again
    assert len(sink.committed_files()) == 1


# ---- the collect sink ----


def collect_harness(tmp_path: Path) -> tuple[CollectSink, OneInputHarness]:
    storage = CheckpointStorage.from_uri(str(tmp_path))
    sink = CollectSink("rows")
    harness = OneInputHarness(TwoPhaseCommitSinkOperator(sink, name="rows"), storage=storage)
    harness.process_batch(batch(1, 2, 3))
    return sink, harness


def staged(tmp_path: Path) -> list[Path]:
    return sorted(tmp_path.rglob("collect-staging/**/*.arrow"))


def test_the_collect_sink_deletes_its_staged_files_after_commit(tmp_path: Path) -> None:
    sink, harness = collect_harness(tmp_path)
    harness.complete(checkpoint_id=1)
    assert len(staged(tmp_path)) == 1
    harness.commit(sink)
    assert sink.result is not None and sink.result.column("v").to_pylist() == [1, 2, 3]
    assert staged(tmp_path) == []
    again = CollectSink("rows")  # a new driver re-committing the same checkpoint
    harness.commit(again)
    assert again.result is not None and again.result.column("v").to_pylist() == [1, 2, 3]


def test_the_collect_sink_abort_after_pre_commit_deletes_the_staged_file(tmp_path: Path) -> None:
    sink, harness = collect_harness(tmp_path)
    transaction = harness.operators[0]._transaction  # type: ignore[attr-defined]
    sink.pre_commit(transaction)
    sink.abort(transaction)  # raised on the closed file before
    assert staged(tmp_path) == []


def test_a_truncated_collect_file_is_refused_naming_it(tmp_path: Path) -> None:
    sink, harness = collect_harness(tmp_path)
    harness.complete(checkpoint_id=1)
    [file] = staged(tmp_path)
    file.write_bytes(file.read_bytes()[:-8])
    with pytest.raises(CommittableError, match=f"{file} .*truncated"):
        harness.commit(sink)


# ---- lifecycle points ----


class RecordingReader(SourceReader):
    def __init__(self, events: list[str]) -> None:
        self.events = events

    def read(self) -> Iterator[pa.RecordBatch]:
        yield batch(1, 2)

    def positions(self) -> dict[str, int]:
        return {}

    def close(self) -> None:
        self.events.append("reader.close")


class RecordingSource(Source):
    def __init__(self, events: list[str]) -> None:
        self.events = events

    def create_reader(self, subtask_index: int, parallelism: int, positions: Any) -> SourceReader:
        return RecordingReader(self.events)


class RecordsClose(OneInputStreamOperator):
    def __init__(self, name: str, events: list[str]) -> None:
        super().__init__(name)
        self.events = events

    def process_batch(self, batch: pa.RecordBatch) -> None:
        self.output.emit(batch)

    def close(self) -> None:
        self.events.append(f"{self.name}.close")


def test_the_source_reader_closes_after_every_operator_of_its_chain() -> None:
    events: list[str] = []
    harness = SourceHarness(
        RecordingSource(events), RecordsClose("a", events), RecordsClose("b", events)
    )
    harness.run()
    assert events == ["a.close", "b.close", "reader.close"]


def test_a_checkpoint_from_a_closed_task_raises_instead_of_returning_the_old_one() -> None:
    harness = OneInputHarness(RecordsClose("a", []))
    harness.process_batch(batch(1))
    first = harness.checkpoint(1)
    assert first.checkpoint_id == 1
    with pytest.raises(RuntimeError, match=r"already ended .* no checkpoint 2"):
        harness.checkpoint(2)


class RecordsPostCommit(TwoPhaseCommitSink):
    """Stages nothing; remembers what post_commit was given."""

    def __init__(self) -> None:
        self.post_committed: list[Any] = []

    def begin_transaction(self, context: Any, checkpoint_id: int) -> list[int]:
        return []

    def write(self, transaction: list[int], batch: pa.RecordBatch) -> None:
        transaction.extend(batch.column("v").to_pylist())

    def pre_commit(self, transaction: list[int]) -> list[Any]:
        return [{"values": list(transaction)}]

    def abort(self, transaction: list[int]) -> None:
        transaction.clear()

    def commit(self, context: CommitContext, committables: list[Any]) -> None:
        pass

    def post_commit(self, context: CommitContext, committables: list[Any]) -> None:
        self.post_committed.append((context.checkpoint_id, committables))


def test_post_commit_receives_the_committed_committables() -> None:
    sink = RecordsPostCommit()
    harness = OneInputHarness(TwoPhaseCommitSinkOperator(sink, name="s"))
    harness.process_batch(batch(4, 5))
    harness.complete(checkpoint_id=3)
    harness.commit(sink)
    assert sink.post_committed == [(3, [{"values": [4, 5]}])]


def test_storage_reads_name_missing_and_damaged_arrow_files(tmp_path: Path) -> None:
    storage = CheckpointStorage(pafs.LocalFileSystem(), str(tmp_path))
    with pytest.raises(CheckpointError, match=f"{tmp_path}/none.arrow is missing"):
        storage.read_table(f"{tmp_path}/none.arrow")
    (tmp_path / "bad.arrow").write_bytes(b"ARROW1 not really")
    with pytest.raises(CheckpointError, match=f"{tmp_path}/bad.arrow is damaged"):
        storage.read_table(f"{tmp_path}/bad.arrow")


def test_rows_per_file_caps_every_file_and_splits_a_larger_batch(tmp_path: Path) -> None:
    sink = FileSink(str(tmp_path / "out"), rows_per_file=400)
    harness = OneInputHarness(TwoPhaseCommitSinkOperator(sink, name="files"))
    harness.process_batch(batch(*range(150)))
    harness.process_batch(batch(*range(150, 1100)))  # ends the first file mid-batch
    harness.complete(checkpoint_id=1)
    assert harness.acknowledgement is not None
    files = harness.acknowledgement.committables["files"]
    assert [file["rows"] for file in files] == [400, 400, 300]
    harness.commit(sink)
    written = [pq.read_table(path).column("v").to_pylist() for path in sink.committed_files()]
    assert sorted(value for values in written for value in values) == list(range(1100))


@pytest.mark.parametrize("rows", [0, -1, True, 2.5, "400"])
def test_rows_per_file_must_be_a_positive_int(tmp_path: Path, rows: object) -> None:
    with pytest.raises(SinkOutputError, match="rows_per_file must be a positive int"):
        FileSink(str(tmp_path / "out"), rows_per_file=rows)  # type: ignore[arg-type]


def test_a_task_that_cannot_write_to_checkpoint_storage_names_flintlocks_own_file(
    tmp_path: Path,
) -> None:
    """An executor that cannot reach the checkpoint storage (no credentials there, say)
    fails at the task's first write: flintlock's own, named with its file and phase."""
    from flintlock.core.errors import LifecycleError
    from flintlock.core.spark.failures import task_markers_dir
    from flintlock.core.spark.stage import _leave_marker
    from flintlock.core.task_info import TaskInfo

    storage = CheckpointStorage.from_uri(str(tmp_path))
    info = TaskInfo("orders-source", "source", 1, 2, run_id="run1", job_name="orders")
    blocked = Path(task_markers_dir(storage, "orders", "run1", info.epoch))
    blocked.parent.mkdir(parents=True)
    blocked.write_text("a file where the markers' folder goes")
    with pytest.raises(LifecycleError) as failure:
        _leave_marker(storage, info)
    message = str(failure.value)
    assert "deploy" in message and "'orders-source'" in message
    assert f"flintlock's own write of {blocked}/" in message
    assert "executors must reach the checkpoint storage" in message
