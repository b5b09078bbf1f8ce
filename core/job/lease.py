"""One driver per job: the lease, taken by compare-and-swap, never by timing.

The lease is a sequence of generations in ``<job folder>/_lease/``: ``<generation>.json``
(zero-padded) names the driver run that took generation N, and is created once
(``CheckpointStorage.create_json_once``). Taking the lease is creating the generation
after the newest one: of two drivers that try, one creates it and the other finds it
taken. The holder renews ``<generation>.renewed.json`` (its heartbeat) every
``renew_seconds``; a stale holder's late renewal touches only its own, older
generation. Releasing creates the next generation as a release record.

A start is refused while the newest generation's holder holds it (renewed within its time
to live, its process not known dead); otherwise it takes the next generation, saying
whom it took over from. A damaged newest generation is an expired one: its holder cannot
be proven alive. Clocks only decide when a lease may be taken over: the generation is the
fencing token a driver writes into everything it publishes, and what makes a paused old
holder harmless is that checkpoints are published create-once and a driver that takes
the lease over from one that did not release it, and is not known dead (a process of
this host that is gone), fences the next checkpoint id first
(``CheckpointCoordinator.fence_next``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import socket
import threading
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

import pyarrow.fs as pafs

from flintlock.core.checkpoint.storage import CheckpointStorage, list_folder
from flintlock.core.errors import CheckpointError, JobLeaseError, LeaseLostError

LEASE_DIR = "_lease"
GENERATION_FILE = re.compile(r"(\d{12})\.json")
DEFAULT_RENEW_SECONDS = 2.0
ACQUIRE_ATTEMPTS = 10
"""Generations lost to drivers that start at the same moment before a start is refused."""
RENEWALS_PER_LEASE = 5
"""A lease holds for this many renewal periods: a few missed renewals do not lose it."""
KEPT_GENERATIONS = 4
"""Newest generations kept in ``_lease/``; older ones are history nobody reads."""

log = logging.getLogger("flintlock.lease")


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
    """Who holds a job's lease (one generation of it), as its files say."""

    run_id: str
    host: str
    pid: int
    process_started: str | None
    acquired: float
    renewed: float
    ttl_seconds: float
    generation: int = 0

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
                renewed=float(document.get("renewed", document["acquired"])),
                ttl_seconds=float(document["ttl_seconds"]),
                generation=int(document.get("generation", 0)),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise CheckpointError(f"the job lease {path} is damaged: {error!r}") from error


@dataclass(frozen=True)
class LeaseState:
    """The newest generation of a job's lease: its holder, or why there is none."""

    generation: int
    path: str
    holder: LeaseHolder | None = None
    released: bool = False
    damaged: str | None = None
    """Why the generation's file could not be read (then it is taken as expired)."""

    def binds(self, run_id: str) -> bool:
        """Whether it keeps driver run ``run_id`` from taking the lease now."""
        holder = self.holder
        return (
            not self.released and holder is not None and holder.run_id != run_id and holder.holds()
        )

    def describe(self) -> str:
        """Whom a driver takes the lease over from, for messages."""
        if self.damaged is not None:
            return f"generation {self.generation}, whose file is damaged ({self.damaged})"
        assert self.holder is not None
        return f"generation {self.generation}, {self.holder.describe()}, not released"


def lease_dir(folder: str) -> str:
    return f"{folder}/{LEASE_DIR}"


def generation_path(folder: str, generation: int) -> str:
    return f"{lease_dir(folder)}/{generation:012d}.json"


def heartbeat_path(folder: str, generation: int) -> str:
    return f"{lease_dir(folder)}/{generation:012d}.renewed.json"


def generations(storage: CheckpointStorage, folder: str) -> list[int]:
    """The generations in ``<folder>/_lease/``, ascending."""
    found = []
    for info in list_folder(storage.filesystem, lease_dir(folder)):
        match = GENERATION_FILE.fullmatch(info.base_name)
        if match is not None and info.type == pafs.FileType.File:
            found.append(int(match.group(1)))
    return sorted(found)


def read_state(storage: CheckpointStorage, folder: str) -> LeaseState | None:
    """The newest generation of the lease, if the job ever had one."""
    for _ in range(3):  # an old generation removed while listed: list again
        found = generations(storage, folder)
        if not found:
            return None
        generation = found[-1]
        path = generation_path(folder, generation)
        try:
            document = storage.read_json(path)
        except CheckpointError as error:
            if isinstance(error.__cause__, FileNotFoundError):
                continue
            return LeaseState(generation, path, damaged=str(error))
        if isinstance(document, dict) and document.get("released") is True:
            return LeaseState(generation, path, released=True)
        try:
            holder = LeaseHolder.from_json(document, path)
        except CheckpointError as error:
            return LeaseState(generation, path, damaged=str(error))
        return LeaseState(generation, path, _with_heartbeat(storage, folder, holder))
    return None


def _with_heartbeat(storage: CheckpointStorage, folder: str, holder: LeaseHolder) -> LeaseHolder:
    """``holder`` renewed as its heartbeat file says (a damaged heartbeat says nothing)."""
    try:
        document = storage.read_json(heartbeat_path(folder, holder.generation))
        renewed = float(document["renewed"])
    except (CheckpointError, KeyError, TypeError, ValueError):
        return holder
    return replace(holder, renewed=max(renewed, holder.renewed))


def read_holder(storage: CheckpointStorage, folder: str) -> LeaseHolder | None:
    """The holder of the newest generation (fresh or not), unless it was released or its
    file is damaged."""
    state = read_state(storage, folder)
    return None if state is None else state.holder if not state.released else None


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
        self.path = lease_dir(folder)
        self.generation = 0
        """The generation this run took: its fencing token (0 before ``acquire``)."""
        self.took_over: str | None = None
        """Whom the lease was taken over from (a holder that did not release it)."""
        self.old_holder_may_publish = False
        """Whether that holder may still publish: not known dead (it may be paused, on
        another host, or its file is damaged). Then the next checkpoint id is fenced."""
        self.lost: str | None = None
        """Why the lease was lost, once it was."""
        self._renewed_at = 0.0  # monotonic time of the last successful renewal
        self._acquired = 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    # ---- acquiring ----

    def acquire(self) -> None:
        """Take the next generation and start renewing it; a JobLeaseError if a live driver
        holds the lease or keeps taking it at the same moment."""
        for attempt in range(ACQUIRE_ATTEMPTS):
            if attempt:  # another driver took the generation meanwhile: look again, apart
                time.sleep(random.uniform(0.01, 0.05) * attempt)
            state = read_state(self.storage, self.folder)
            if state is not None and state.binds(self.run_id):
                self._refuse(state)
            generation = 1 if state is None else state.generation + 1
            self.took_over = None if state is None or state.released else state.describe()
            self._acquired = time.time()
            document = {**self._document(self._acquired), "generation": generation}
            if self.storage.create_json_once(generation_path(self.folder, generation), document):
                break
        else:
            raise JobLeaseError(
                f"job '{self.job_name}' is being started by other drivers at the same moment: "
                f"{ACQUIRE_ATTEMPTS} generations of its lease {self.path} were taken by "
                f"others first; this start is refused"
            )
        self.generation = generation
        self._renewed_at = time.monotonic()
        gone = state is not None and state.holder is not None and state.holder.alive() is False
        self.old_holder_may_publish = self.took_over is not None and not gone
        if self.took_over is not None:
            log.warning(
                "job '%s': run %s takes the lease over from %s",
                self.job_name,
                self.run_id,
                self.took_over,
            )
        self._heartbeat(self._acquired)
        self._forget_old_generations()
        self._thread = threading.Thread(
            target=self._renew_until_released, name=f"flintlock-lease-{self.run_id}", daemon=True
        )
        self._thread.start()

    def _refuse(self, state: LeaseState) -> None:
        holder = state.holder
        assert holder is not None
        raise JobLeaseError(
            f"job '{self.job_name}' is already running: its lease {state.path} is held by "
            f"{holder.describe()}. Stop that driver (flintlock stop) or wait until it "
            f"ends; a lease not renewed for {holder.ttl_seconds:.0f} s is taken over"
        )

    # ---- holding ----

    def check(self, action: str) -> None:
        """The fencing check: raise LeaseLostError unless this run still holds the newest
        generation, before it ``action`` (completes checkpoint 3, commits, writes the
        result). A check is an early stop, not the guarantee: that is create-once."""
        with self._lock:
            if self.lost is None:
                self._verify()
            if self.lost is not None:
                raise LeaseLostError(
                    f"job '{self.job_name}': this driver (run {self.run_id}, lease generation "
                    f"{self.generation}) lost its lease {self.path}: {self.lost}. It stops "
                    f"before it {action}; the driver that holds the lease now runs the job"
                )

    def _verify(self) -> None:
        """Set ``lost`` if a newer generation exists, or renewals lapsed: one listing of
        ``_lease/`` (generations are created once, so their names say it all); the newer
        holder's file is read only to name it."""
        found = generations(self.storage, self.folder)
        if found and found[-1] > self.generation:
            state = read_state(self.storage, self.folder)
            holder = state.holder if state is not None else None
            taker = holder.describe() if holder else f"generation {found[-1]}"
            self.lost = f"it was taken over by {taker}"
        elif self.generation not in found:
            self.lost = "its generation was removed"
        elif time.monotonic() - self._renewed_at >= self.ttl_seconds:
            self.lost = f"it was not renewed for {self.ttl_seconds:.0f} s"

    def _renew_until_released(self) -> None:
        while not self._stop.wait(self.renew_seconds):
            with self._lock:
                if self.lost is not None:
                    return
                with contextlib.suppress(CheckpointError, OSError):  # tried again next period
                    self._verify()
                    if self.lost is not None:
                        return
                    self._heartbeat(time.time())

    def _heartbeat(self, now: float) -> None:
        """Renew: only this generation's heartbeat is written (a late one harms nobody)."""
        document = {"generation": self.generation, "run_id": self.run_id, "renewed": now}
        self.storage.write_json_atomically(heartbeat_path(self.folder, self.generation), document)
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
        return {"job_name": self.job_name, **asdict(holder), "took_over": self.took_over}

    def _forget_old_generations(self) -> None:
        """Remove generations older than the newest few (nobody reads them)."""
        for old in generations(self.storage, self.folder)[:-KEPT_GENERATIONS]:
            for path in (generation_path(self.folder, old), heartbeat_path(self.folder, old)):
                with contextlib.suppress(OSError):
                    self.storage.delete_file(path)

    # ---- releasing ----

    def release(self) -> None:
        """Stop renewing; if this run still holds the newest generation, create the next
        one as a release record (a later start then knows nobody is left to fence).
        Idempotent."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        with self._lock:
            if self.generation == 0 or self.lost == "it was released":
                return
            state = read_state(self.storage, self.folder)
            if state is not None and state.generation == self.generation:
                released = {
                    "job_name": self.job_name,
                    "released": True,
                    "run_id": self.run_id,
                    "generation": self.generation + 1,
                    "time": time.time(),
                }
                self.storage.create_json_once(
                    generation_path(self.folder, self.generation + 1), released
                )
                with contextlib.suppress(OSError):
                    self.storage.delete_file(heartbeat_path(self.folder, self.generation))
            self.lost = "it was released"
