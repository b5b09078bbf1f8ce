"""What the driver's and the tasks' storage steps cost in requests on an object store
(issue 34: W4 on S3 spent its epochs in requests): counted by the test proxy in front of
a real S3 server (moto's). Each step makes the requests it needs and no lookups, folder
markers or reads of what it wrote itself."""

from __future__ import annotations

import pyarrow as pa
import pytest
from acknowledgements import acknowledgement
from s3_faults import FaultInjectingProxy
from s3_server import S3Server

from flintlock.core.checkpoint.coordinator import CheckpointCoordinator, CompletedCheckpoint
from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.errors import StorageError
from flintlock.core.job.control import JobControl
from flintlock.core.job.lease import JobLease


@pytest.fixture
def storage(s3: S3Server, s3_folder: str, s3_proxy: FaultInjectingProxy) -> CheckpointStorage:
    return CheckpointStorage.from_uri(s3.uri(s3_folder, endpoint=s3_proxy.endpoint))


def counted(s3_proxy: FaultInjectingProxy) -> dict[str, int]:
    """The requests since the last call, by operation (then forgets them)."""
    counts = {operation: count for operation, count in s3_proxy.counts.items() if count}
    s3_proxy.counts.clear()
    return counts


def test_a_read_is_one_get_and_a_missing_file_one_request(
    storage: CheckpointStorage, s3_proxy: FaultInjectingProxy
) -> None:
    base = storage.base_path
    storage.write_json(f"{base}/a.json", {"a": 1})
    storage.write_table(f"{base}/t.arrow", pa.table({"k": [1, 2]}))
    counted(s3_proxy)
    assert storage.read_json(f"{base}/a.json") == {"a": 1}
    assert storage.read_table(f"{base}/t.arrow").column("k").to_pylist() == [1, 2]
    assert storage.read_json(f"{base}/none.json", if_there=True) is None
    assert counted(s3_proxy) == {"GetObject": 3}


def test_removing_a_folder_is_one_listing_and_one_batch_delete(
    storage: CheckpointStorage, s3_proxy: FaultInjectingProxy
) -> None:
    folder = f"{storage.base_path}/run/chk-3"
    for index in range(5):
        storage.write_json(f"{folder}/task-{index}/_task.json", {"index": index})
    storage.write_json(f"{storage.base_path}/run/chk-30/keep.json", {})
    counted(s3_proxy)
    storage.delete_dir(folder)
    storage.delete_file(f"{storage.base_path}/run/nothing.json")
    assert counted(s3_proxy) == {"ListObjects": 1, "DeleteObjects": 1, "DeleteObject": 1}
    assert storage.read_json(f"{folder}/task-0/_task.json", if_there=True) is None
    assert storage.read_json(f"{storage.base_path}/run/chk-30/keep.json") == {}  # a sibling


def test_a_lease_check_is_one_listing_and_a_status_write_one_put(
    storage: CheckpointStorage, s3_proxy: FaultInjectingProxy
) -> None:
    folder = JobFolder(storage, "orders")
    folder.open()
    lease = JobLease(storage, folder.path, "orders", "run-1", renew_seconds=60)
    lease.acquire()
    try:
        folder.lease = lease
        control = JobControl(folder)
        control.write_status({"state": "RUNNING", "epochs": [1]})
        counted(s3_proxy)
        lease.check("completes checkpoint 1")
        assert counted(s3_proxy) == {"ListObjects": 1}
        control.write_status({"state": "RUNNING", "epochs": [1, 2]})  # it wrote the last one
        assert counted(s3_proxy) == {"PutObject": 1}
        assert control.read_status()["epochs"] == [1, 2]
    finally:
        lease.release()


def test_a_snapshots_writes_go_side_by_side_and_are_all_written_when_its_block_ends(
    storage: CheckpointStorage, s3_proxy: FaultInjectingProxy
) -> None:
    """A subtask's state files and manifest do not wait for each other's answers (each a
    round trip); all are there once the block ends. Written in line, they never meet."""
    folder = f"{storage.base_path}/run/chk-1/op/0-7"
    s3_proxy.hold_until_together("PutObject", 3)
    with storage.writes_side_by_side():
        storage.write_table(f"{folder}/operator-a.arrow", pa.table({"value": [1]}))
        storage.write_table(f"{folder}/operator-b.arrow", pa.table({"value": [2]}))
        storage.write_json(f"{folder}/_task.json", {"files": 2})
    assert s3_proxy.met == [True, True, True]
    assert counted(s3_proxy) == {"PutObject": 3}
    assert storage.read_table(f"{folder}/operator-b.arrow").column("value").to_pylist() == [2]
    assert storage.read_json(f"{folder}/_task.json") == {"files": 2}
    s3_proxy.hold_until_together("PutObject", 2, most=1.0)
    storage.write_json(f"{folder}/one.json", {})  # no block: each waits for its answer
    storage.write_json(f"{folder}/two.json", {})
    assert s3_proxy.met == [False, False]


def test_a_write_that_fails_side_by_side_raises_when_the_block_ends_naming_its_file(
    storage: CheckpointStorage, s3_proxy: FaultInjectingProxy
) -> None:
    folder = f"{storage.base_path}/run/chk-2/op/0-8"
    s3_proxy.fail("PutObject", 1, status=403, where="operator-b")
    failed = pytest.raises(StorageError, match=f"cannot write {folder}/operator-b.arrow")
    with failed, storage.writes_side_by_side():
        storage.write_table(f"{folder}/operator-a.arrow", pa.table({"value": [1]}))
        storage.write_table(f"{folder}/operator-b.arrow", pa.table({"value": [2]}))
        storage.write_json(f"{folder}/_task.json", {"files": 2})
    assert storage.read_json(f"{folder}/_task.json") == {"files": 2}  # the others ended
    s3_proxy.fail("PutObject", 1, status=500, where="operator-c")  # a passing fault
    with storage.writes_side_by_side():
        storage.write_table(f"{folder}/operator-c.arrow", pa.table({"value": [3]}))
    assert storage.read_table(f"{folder}/operator-c.arrow").column("value").to_pylist() == [3]


def test_a_commit_right_after_this_drivers_own_lists_no_checkpoints(
    storage: CheckpointStorage, s3_proxy: FaultInjectingProxy
) -> None:
    """A driver that committed every checkpoint up to N knows none below N + 1 waits: its
    commit of N + 1 writes its records and lists nothing; a driver that did not lists."""
    folder = JobFolder(storage, "orders")
    folder.open()
    coordinator = CheckpointCoordinator(folder)

    def completed(checkpoint_id: int) -> CompletedCheckpoint:
        ack = acknowledgement(checkpoint_id=checkpoint_id)
        return coordinator.complete(checkpoint_id, "run1", False, [ack], {("v", 0)})

    first = completed(1)
    counted(s3_proxy)
    coordinator.commit(first, {})
    assert counted(s3_proxy).get("ListObjects", 0) >= 1  # what waits below 1: looked up
    second = completed(2)
    counted(s3_proxy)
    coordinator.commit(second, {})
    assert counted(s3_proxy) == {"PutObject": 2}  # its commit record and the commit log's
    third = completed(3)
    counted(s3_proxy)
    CheckpointCoordinator(folder).commit(third, {})  # another driver's view: it looks
    assert counted(s3_proxy).get("ListObjects", 0) >= 1
    assert coordinator.uncommitted_before(4) == [] and third.committed
