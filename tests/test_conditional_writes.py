"""``replace_if`` (core/storage/conditional.py), the compare-and-swap that a job's result
and status are written with: the check a writer makes still holds when it writes, on a
local file system (a ``flock`` held from the read to the rename) and on a real S3 API
(moto's server: ``PutObject`` with ``If-Match``), whatever another writer does meanwhile.
No sleeps decide anything: the other writer is made to come in between."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from s3_faults import FaultInjectingProxy
from s3_server import BUCKET, S3Server

from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.storage.conditional import replace_if
from flintlock.errors import CheckpointError, LeaseLostError


def test_a_replace_refused_by_its_check_writes_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "result.json")
    seen: list[bytes | None] = []
    assert replace_if(pafs.LocalFileSystem(), path, b"one", lambda now: not seen.append(now))
    assert not replace_if(pafs.LocalFileSystem(), path, b"two", lambda now: bool(seen.append(now)))
    assert seen == [None, b"one"] and Path(path).read_bytes() == b"one"


def test_on_s3_a_writer_that_came_between_the_check_and_the_write_is_seen(
    s3: S3Server, s3_folder: str
) -> None:
    filesystem = s3.filesystem()
    path = f"{BUCKET}/{s3_folder}/result.json"
    assert replace_if(filesystem, path, b'{"g": 1}', lambda now: now is None)
    checks: list[bytes | None] = []

    def check(now: bytes | None) -> bool:
        checks.append(now)
        if len(checks) == 1:  # another driver writes after this check, before the PUT
            with filesystem.open_output_stream(path) as out:
                out.write(b'{"g": 3}')
        return now is None or json.loads(now)["g"] <= 2

    assert not replace_if(filesystem, path, b'{"g": 2}', check)
    assert checks == [b'{"g": 1}', b'{"g": 3}']  # If-Match failed; read again, refused
    with filesystem.open_input_stream(path) as source:
        assert source.read() == b'{"g": 3}'


def test_locally_a_second_writer_waits_for_the_first_and_checks_what_it_wrote(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "status.json")
    first_checked, first_may_go = threading.Event(), threading.Event()
    seen_by_second: list[bytes | None] = []

    def first() -> None:
        def check(now: bytes | None) -> bool:
            first_checked.set()
            first_may_go.wait(10)
            return True

        replace_if(pafs.LocalFileSystem(), path, b"first", check)

    writer = threading.Thread(target=first)
    writer.start()
    assert first_checked.wait(10)
    second = threading.Thread(
        target=lambda: replace_if(
            pafs.LocalFileSystem(), path, b"second", lambda now: not seen_by_second.append(now)
        )
    )
    second.start()
    second.join(0.5)
    assert second.is_alive() and not seen_by_second  # blocked on the first's lock
    first_may_go.set()
    writer.join(10)
    second.join(10)
    assert seen_by_second == [b"first"] and Path(path).read_bytes() == b"second"


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_driver_of_an_older_generation_never_replaces_the_newer_ones_result(
    where: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if where == "s3":
        s3: S3Server = request.getfixturevalue("s3")
        storage = CheckpointStorage.from_uri(s3.uri(f"{request.getfixturevalue('s3_folder')}"))
    else:
        storage = CheckpointStorage.from_uri(str(tmp_path))
    newer, older = (JobFolder(storage, "orders") for _ in range(2))
    for folder, generation in ((newer, 5), (older, 4)):
        folder.open()
        folder.lease = Holding(generation)  # type: ignore[assignment]
    newer.record_running("run-new")
    with pytest.raises(LeaseLostError, match="run run-new \\(lease generation 5\\) recorded"):
        older.record_finished("run-old", 3, {})
    record = newer.read_record()
    assert record is not None and record.run_id == "run-new" and record.status == "RUNNING"


class Holding:
    """A lease that holds ``generation`` and passes every early check: only the
    conditional write stands between an older generation and the result."""

    def __init__(self, generation: int) -> None:
        self.generation = generation

    def check(self, action: str) -> None:
        pass


def test_a_passing_s3_fault_of_a_conditional_write_is_retried_a_lasting_one_named(
    s3: S3Server, s3_folder: str
) -> None:
    with FaultInjectingProxy(s3.endpoint) as proxy:
        storage = CheckpointStorage.from_uri(s3.uri(s3_folder, endpoint=proxy.endpoint))
        path = f"{storage.base_path}/_lease/generation-1.json"
        proxy.fail("PutObject", 2)  # two InternalErrors, then the store answers
        assert storage.create_json_once(path, {"generation": 1})
        assert proxy.injected["PutObject"] == 2
        assert not storage.create_json_once(path, {"generation": 1})  # created once
        proxy.fail("PutObject", 2)
        assert storage.replace_json_if(
            f"{storage.base_path}/_result.json", {"g": 1}, lambda _: True
        )
        assert proxy.injected["PutObject"] == 2
        proxy.fail("PutObject", 100, status=403)  # a lasting refusal: the file is named
        with pytest.raises(CheckpointError, match=f"s3://flintlock-tests/{s3_folder}/x.json"):
            storage.create_json_once(f"{storage.base_path}/x.json", {})
