"""Listings of folders that other processes change meanwhile (real files, real threads).

Arrow's listing raises FileNotFoundError when the folder it lists appears or vanishes
while it lists. A job master polling its control folder while a first request creates
it crashed that way in a chaos run; ``list_folder`` lists again. Each test of a folder
that comes and goes first shows Arrow's own listing failing under the same churn, so it
could fail. Arrow 26 lists a tree through a subfolder removed meanwhile; the recursive
test holds ``list_folder`` to that for every Arrow flintlock accepts (pyarrow>=16).
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow.fs as pafs

from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.storage import CheckpointStorage, list_folder
from flintlock.core.job.control import JobControl
from flintlock.core.job.lease import JobLease

FILESYSTEM = pafs.LocalFileSystem()
BUDGET_SECONDS = 20.0


@contextmanager
def churning(change: Callable[[], None]) -> Iterator[None]:
    """Run ``change`` over and over in another thread while the block runs."""
    done = threading.Event()

    def loop() -> None:
        while not done.is_set():
            change()

    thread = threading.Thread(target=loop)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def arrow_fails(folder: Path, recursive: bool) -> bool:
    """Arrow's listing until it raises (True), or the budget ends (False)."""
    selector = pafs.FileSelector(str(folder), allow_not_found=True, recursive=recursive)
    deadline = time.monotonic() + BUDGET_SECONDS
    while time.monotonic() < deadline:
        try:
            FILESYSTEM.get_file_info(selector)
        except FileNotFoundError:
            return True
    return False


def test_a_folder_that_appears_and_vanishes_lists_as_empty_or_as_it_is(tmp_path: Path) -> None:
    folder = tmp_path / "_control"

    def create_and_remove() -> None:
        folder.mkdir(exist_ok=True)
        (folder / "request.json").write_text("{}")
        shutil.rmtree(folder, ignore_errors=True)

    with churning(create_and_remove):
        assert arrow_fails(folder, recursive=False)
        listings = {
            tuple(info.base_name for info in list_folder(FILESYSTEM, str(folder)))
            for _ in range(3000)
        }
    assert listings <= {(), ("request.json",)}, listings


def test_a_recursive_listing_survives_a_subfolder_removed_meanwhile(tmp_path: Path) -> None:
    kept = {f"part-{n}.parquet" for n in range(50)}
    for name in kept:
        (tmp_path / f"date={name[5:-8]}").mkdir()
        (tmp_path / f"date={name[5:-8]}" / name).write_text("x")
    staging = tmp_path / "_staging-other-job"

    def stage_and_commit() -> None:
        (staging / "chk-1").mkdir(parents=True, exist_ok=True)
        (staging / "chk-1" / "part.parquet").write_text("x")
        shutil.rmtree(staging, ignore_errors=True)

    with churning(stage_and_commit):
        for _ in range(3000):
            found = list_folder(FILESYSTEM, str(tmp_path), recursive=True)
            assert kept <= {info.base_name for info in found}


def test_a_job_master_polls_while_the_first_request_creates_the_control_folder(
    tmp_path: Path,
) -> None:
    folder = JobFolder(CheckpointStorage.from_uri(str(tmp_path)), "orders")
    folder.open()
    control = JobControl(folder)
    lease = JobLease(control.storage, folder.path, "orders", "run-a", renew_seconds=0.2)
    lease.acquire()
    seen: set[str] = set()

    def request_and_remove_the_folder() -> None:
        request = control.request("savepoint")
        seen.add(request.request_id)
        shutil.rmtree(control.directory, ignore_errors=True)

    try:
        with churning(request_and_remove_the_folder):
            assert arrow_fails(Path(control.directory), recursive=False)
            taken = [control.next_request("run-a") for _ in range(3000)]
            deadline = time.monotonic() + 30  # a slow request thread: poll until it is seen
            while not any(taken) and time.monotonic() < deadline:
                taken.append(control.next_request("run-a"))
    finally:
        lease.release()
    ids = {request.request_id for request in taken if request is not None}
    assert ids and ids <= seen  # requests were taken, each one a request that was made
