"""One driver per job: the lease the running driver holds in the job's folder.

``<job folder>/_lease.json`` names the holder (run id, host, pid, when it was renewed,
for how long a renewal holds). The driver renews it every ``renew_seconds`` from a
background thread, through the same ``pyarrow.fs`` storage as the checkpoints, so any
process that sees the storage can tell whether the job runs. A start while a fresh lease
of a live driver exists is refused, naming the holder; a lease whose holder is gone (not
renewed within its time to live, or its process dead on this host) is taken over.

Two drivers that start together each write a candidate file under
``_lease-candidates/`` and then list them: a driver that sees only its own takes the
lease (of two, one always sees the other); drivers that see each other step back and
try again after a random pause, and find the lease taken.

A driver checks its lease (``check``, the fencing check) before it completes a
checkpoint, commits, or writes the job's result: once another driver took it over, or it
could not renew it in time, it stops there, so two drivers never both publish. What
remains is the moment between the check and the write.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow.fs as pafs

from flintlock.core.checkpoint.storage import CheckpointStorage, list_folder
from flintlock.core.job_errors import CheckpointError, JobLeaseError, LeaseLostError

LEASE = "_lease.json"
CANDIDATES = "_lease-candidates"
DEFAULT_RENEW_SECONDS = 2.0
ACQUIRE_ATTEMPTS = 10
"""Attempts of drivers that start at the same moment before one is refused."""
RENEWALS_PER_LEASE = 5
"""A lease holds for this many renewal periods: a few missed renewals do not lose it."""


def process_start(pid: int) -> str | None:
    """When process ``pid`` started (Linux ``/proc``), so a reused pid is not taken for it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return fields[19].decode()  # starttime, field 22 of stat
    except (OSError, IndexError):
        return None


def process_alive(pid: int, started: str | None) -> bool:
    """Whether process ``pid`` of this host runs and is the one that started at ``started``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by someone else
    return started is None or process_start(pid) in (None, started)


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds (or asks for) a job's lease, as its file says."""

    run_id: str
    host: str
    pid: int
    process_started: str | None
    acquired: float
    renewed: float
    ttl_seconds: float

    def age(self, now: float | None = None) -> float:
        """Seconds since the last renewal (by this host's clock)."""
        return (time.time() if now is None else now) - self.renewed

    def alive(self) -> bool | None:
        """False if its process is known to be gone (same host), else True or None."""
        if self.host != socket.gethostname():
            return None
        return process_alive(self.pid, self.process_started)

    def holds(self, now: float | None = None) -> bool:
        """True while the lease binds others: renewed within its time to live, by a
        process that is not known to be dead."""
        return self.age(now) < self.ttl_seconds and self.alive() is not False

    def describe(self) -> str:
        """``run 1a2b3c (pid 4242 on host h, renewed 1.2 s ago)``, for messages."""
        return (
            f"run {self.run_id} (pid {self.pid} on host {self.host}, renewed "
            f"{max(0.0, self.age()):.1f} s ago)"
        )

    @classmethod
    def from_json(cls, document: Any, path: str) -> LeaseHolder:
        try:
            return cls(
                run_id=str(document["run_id"]),
                host=str(document["host"]),
                pid=int(document["pid"]),
                process_started=document.get("process_started"),
                acquired=float(document["acquired"]),
                renewed=float(document["renewed"]),
                ttl_seconds=float(document["ttl_seconds"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise CheckpointError(f"the job lease {path} is damaged: {error!r}") from error


def read_holder(storage: CheckpointStorage, folder: str) -> LeaseHolder | None:
    """The holder ``<folder>/_lease.json`` names, if the file exists."""
    path = f"{folder}/{LEASE}"
    try:
        document = storage.read_json(path)
    except CheckpointError as error:
        if isinstance(error.__cause__, FileNotFoundError):
            return None
        raise
    return LeaseHolder.from_json(document, path)


class JobLease:
    """The lease of one driver run on one job folder: acquire, renew, check, release."""

    def __init__(
        self,
        storage: CheckpointStorage,
        folder: str,
        job_name: str,
        run_id: str,
        renew_seconds: float = DEFAULT_RENEW_SECONDS,
    ) -> None:
        if not renew_seconds > 0:
            raise JobLeaseError(f"lease renewal every {renew_seconds!r} s: must be > 0")
        self.storage = storage
        self.folder = folder
        self.job_name = job_name
        self.run_id = run_id
        self.renew_seconds = float(renew_seconds)
        self.ttl_seconds = self.renew_seconds * RENEWALS_PER_LEASE
        self.path = f"{folder}/{LEASE}"
        self.lost: str | None = None
        """Why the lease was lost, once it was."""
        self._renewed_at = 0.0  # monotonic time of the last successful renewal
        self._acquired = 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    # ---- acquiring ----

    def acquire(self) -> None:
        """Take the lease and start renewing it; a JobLeaseError if a live driver holds it
        or keeps starting at the same moment."""
        rivals: list[LeaseHolder] = []
        for attempt in range(ACQUIRE_ATTEMPTS):
            if attempt:  # both saw each other: both stepped back; try again, apart
                time.sleep(random.uniform(0.01, 0.05) * attempt)
            rivals = self._try_acquire()
            if not rivals:
                break
        else:
            raise JobLeaseError(
                f"job '{self.job_name}' is being started by another driver at the same "
                f"moment ({', '.join(r.describe() for r in rivals)}): this start is refused"
            )
        self._thread = threading.Thread(
            target=self._renew_until_released, name=f"flintlock-lease-{self.run_id}", daemon=True
        )
        self._thread.start()

    def _try_acquire(self) -> list[LeaseHolder]:
        """One attempt: write a candidate, then list them all. Whoever sees only its own
        takes the lease (of two, at least one sees the other, so never both); the
        others are returned (and this candidate withdrawn)."""
        self._refuse_if_held(read_holder(self.storage, self.folder))
        mine = f"{self.folder}/{CANDIDATES}/{self.run_id}.json"
        self._acquired = time.time()
        self.storage.write_json_atomically(mine, self._document(self._acquired))
        try:
            rivals = self._other_candidates()
            self._refuse_if_held(read_holder(self.storage, self.folder))
            if not rivals:
                self._write(self._acquired)  # before the candidate goes: one is always seen
            return rivals
        finally:
            with contextlib.suppress(OSError):
                self.storage.filesystem.delete_file(mine)

    def _refuse_if_held(self, holder: LeaseHolder | None) -> None:
        if holder is not None and holder.run_id != self.run_id and holder.holds():
            raise JobLeaseError(
                f"job '{self.job_name}' is already running: its lease {self.path} is held by "
                f"{holder.describe()}. Stop that driver (flintlock stop) or wait until it "
                f"ends; a lease not renewed for {holder.ttl_seconds:.0f} s is taken over"
            )

    def _other_candidates(self) -> list[LeaseHolder]:
        """Live candidates of other drivers (those of dead starts are removed)."""
        directory = f"{self.folder}/{CANDIDATES}"
        live = []
        for info in list_folder(self.storage.filesystem, directory):
            if info.type != pafs.FileType.File or not info.base_name.endswith(".json"):
                continue
            try:
                candidate = LeaseHolder.from_json(self.storage.read_json(info.path), info.path)
            except CheckpointError:
                continue  # half-written or withdrawn meanwhile
            if candidate.run_id == self.run_id:
                continue
            if candidate.holds():
                live.append(candidate)
            elif candidate.age() > candidate.ttl_seconds or candidate.alive() is False:
                with contextlib.suppress(OSError):  # left by a start that died
                    self.storage.filesystem.delete_file(info.path)
        return live

    # ---- holding ----

    def check(self, action: str) -> None:
        """The fencing check: raise LeaseLostError unless this run still holds the lease,
        before it ``action`` (completes checkpoint 3, commits, writes the result)."""
        with self._lock:
            if self.lost is None:
                self._verify()
            if self.lost is not None:
                raise LeaseLostError(
                    f"job '{self.job_name}': this driver (run {self.run_id}) lost its lease "
                    f"{self.path}: {self.lost}. It stops before it {action}; the driver that "
                    f"holds the lease now runs the job"
                )

    def _verify(self) -> None:
        """Set ``lost`` if the file names another run, is gone, or renewals lapsed."""
        try:
            holder = read_holder(self.storage, self.folder)
        except CheckpointError as error:
            self.lost = str(error)
            return
        if holder is None:
            self.lost = "the lease file was removed"
        elif holder.run_id != self.run_id:
            self.lost = f"it was taken over by {holder.describe()}"
        elif time.monotonic() - self._renewed_at >= self.ttl_seconds:
            self.lost = f"it was not renewed for {self.ttl_seconds:.0f} s"

    def _renew_until_released(self) -> None:
        while not self._stop.wait(self.renew_seconds):
            with self._lock:
                if self.lost is not None:
                    return
                self._verify()
                if self.lost is not None:
                    return
                # a failed write is tried again next period; the check fails once it lapses
                with contextlib.suppress(OSError):
                    self._write(time.time())

    def _write(self, now: float) -> None:
        self.storage.write_json_atomically(self.path, self._document(now))
        self._renewed_at = time.monotonic()

    def _document(self, now: float) -> dict[str, Any]:
        holder = LeaseHolder(
            run_id=self.run_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            process_started=process_start(os.getpid()),
            acquired=self._acquired,
            renewed=now,
            ttl_seconds=self.ttl_seconds,
        )
        return {"job_name": self.job_name, **asdict(holder)}

    # ---- releasing ----

    def release(self) -> None:
        """Stop renewing; remove the lease file if it still names this run. Idempotent."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        with self._lock:
            try:
                holder = read_holder(self.storage, self.folder)
            except CheckpointError:
                return
            if holder is not None and holder.run_id == self.run_id:
                self.storage.filesystem.delete_file(self.path)
            self.lost = self.lost or "it was released"
