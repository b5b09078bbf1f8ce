"""Transient storage errors are retried (issue 32): a real S3 server (moto's) behind a
proxy that answers chosen requests with an S3 error, as a store's passing fault would.
One failure is retried and the read succeeds; a lasting or a permanent one is a
CheckpointError naming the file, after a bounded number of tries."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from s3_faults import FaultInjectingProxy
from s3_server import BUCKET, S3Server

from flintlock import CheckpointError
from flintlock.core.checkpoint.retries import ATTEMPTS, is_transient
from flintlock.core.checkpoint.storage import CheckpointStorage


@pytest.fixture
def storage(s3: S3Server, s3_folder: str, s3_proxy: FaultInjectingProxy) -> CheckpointStorage:
    """Checkpoint storage of a fresh folder, reached through the proxy."""
    return CheckpointStorage.from_uri(s3.uri(s3_folder, endpoint=s3_proxy.endpoint))


def test_one_failed_get_object_is_retried_and_the_read_succeeds(
    storage: CheckpointStorage, s3_proxy: FaultInjectingProxy
) -> None:
    path = f"{storage.base_path}/_job.json"
    storage.write_json(path, {"job_name": "orders"})
    s3_proxy.fail("GetObject", 1)
    assert storage.read_json(path) == {"job_name": "orders"}
    assert s3_proxy.injected["GetObject"] == 1  # the store really failed once

    table = pa.table({"k": [1, 2, 3]})
    storage.write_table(f"{storage.base_path}/state.arrow", table)
    s3_proxy.fail("GetObject", 1)
    assert storage.read_table(f"{storage.base_path}/state.arrow").equals(table)
    assert s3_proxy.injected["GetObject"] == 1


def test_a_lasting_failure_is_a_checkpoint_error_naming_the_file(
    storage: CheckpointStorage, s3_proxy: FaultInjectingProxy
) -> None:
    path = f"{storage.base_path}/checkpoints/chk-3/_metadata.json"
    storage.write_json(path, {"checkpoint_id": 3})
    s3_proxy.fail("GetObject", 1000)
    started = time.monotonic()
    lasting = f"cannot read {path}: the storage failed {ATTEMPTS} times"
    with pytest.raises(CheckpointError, match=lasting):
        storage.read_json(path)
    assert s3_proxy.injected["GetObject"] == ATTEMPTS  # bounded: then it gives up
    assert time.monotonic() - started < 5


def test_a_permanent_failure_is_not_retried_and_names_the_file(
    storage: CheckpointStorage, s3_proxy: FaultInjectingProxy
) -> None:
    path = f"{storage.base_path}/_result.json"
    storage.write_json(path, {"status": "RUNNING"})
    s3_proxy.fail("HeadObject", 1000, status=403)
    with pytest.raises(CheckpointError, match=f"cannot look up {path}: .*ACCESS_DENIED"):
        storage.exists(path)
    assert s3_proxy.injected["HeadObject"] == 1
    assert path.startswith(f"{BUCKET}/")


def test_a_create_once_on_s3_that_fails_for_a_while_is_tried_again(
    storage: CheckpointStorage, s3_proxy: FaultInjectingProxy
) -> None:
    """A commit record's or a checkpoint's create (PutObject, If-None-Match) answered
    with HTTP 500 more often than boto3 tries is tried again, and creates the file once;
    a lasting 403 is a CheckpointError naming the file."""
    path = f"{storage.base_path}/_commits/chk-1.json"
    s3_proxy.fail("PutObject", 4, where="/_commits/")  # boto3 tries 3 times, then flintlock
    assert storage.create_json_once(path, {"checkpoint_id": 1}) is True
    assert s3_proxy.injected["PutObject"] == 4
    assert storage.read_json(path) == {"checkpoint_id": 1}
    assert storage.create_json_once(path, {"checkpoint_id": 2}) is False  # created once

    s3_proxy.fail("PutObject", 1000, status=403, where="/_commits/")
    denied = f"s3://{storage.base_path}/_commits/chk-2.json cannot be created: .*AccessDenied"
    with pytest.raises(CheckpointError, match=denied):
        storage.create_json_once(f"{storage.base_path}/_commits/chk-2.json", {})
    assert s3_proxy.injected["PutObject"] == 1  # a refusal is not a passing fault


def test_only_the_stores_passing_faults_are_transient() -> None:
    assert is_transient(OSError("AWS Error INTERNAL_FAILURE during GetObject operation"))
    assert is_transient(OSError("AWS Error SLOW_DOWN during PutObject operation: SlowDown"))
    assert not is_transient(OSError("AWS Error ACCESS_DENIED during GetObject operation"))
    assert not is_transient(FileNotFoundError("InternalError in the name, still missing"))
    assert not is_transient(ValueError("INTERNAL_FAILURE"))
