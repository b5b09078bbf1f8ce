"""What the driver's and the tasks' storage steps cost in requests on an object store
(issue 34: W4 on S3 spent its epochs in requests): counted by the test proxy in front of
a real S3 server (moto's). Each step makes the requests it needs and no lookups, folder
markers or reads of what it wrote itself."""

from __future__ import annotations

import pyarrow as pa
import pytest
from s3_faults import FaultInjectingProxy
from s3_server import S3Server

from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.storage import CheckpointStorage
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
