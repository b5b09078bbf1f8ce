"""A real PostgreSQL server for the tests: ``initdb`` and ``pg_ctl`` in a temporary
folder, on a free loopback port, as a non-root user, stopped at the end (no mocks).

Fixtures: ``postgres`` (a session's server allowing prepared transactions), ``pg_conninfo``
(a fresh database of it per test), ``postgres_without_2pc`` (a server with
``max_prepared_transactions = 0``, started only by the tests that ask for it).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest


def postgres_bindir() -> str | None:
    """The folder of ``initdb``/``pg_ctl``: ``pg_config --bindir``, else Debian's folder."""
    folders = []
    if shutil.which("pg_config"):
        found = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        folders.append(found.stdout.strip())
    folders += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for folder in folders:
        if os.path.exists(f"{folder}/initdb") and os.path.exists(f"{folder}/pg_ctl"):
            return folder
    return None


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PostgresServer:
    """One running server: its folder, port and the conninfo of its ``postgres`` database."""

    folder: str
    port: int
    bindir: str
    options: str = ""
    """The server's start options (``pg_ctl -o``), to start it again after a stop."""

    def conninfo(self, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} dbname={dbname} user=postgres"

    def run(self, *command: str) -> None:
        """Run a server program as the folder's owner (``postgres`` when we are root)."""
        as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        done = subprocess.run(
            [*as_user, f"{self.bindir}/{command[0]}", *command[1:]],
            capture_output=True,
            text=True,
            cwd=self.folder,
        )
        if done.returncode != 0:
            log = ""
            if os.path.exists(f"{self.folder}/log"):
                with open(f"{self.folder}/log") as file:
                    log = file.read()[-3000:]
            raise RuntimeError(f"{command[0]} failed: {done.stdout}{done.stderr}\n{log}")

    def stop(self) -> None:
        self.run("pg_ctl", "-D", f"{self.folder}/data", "-m", "fast", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)

    def down_for(self, seconds: float) -> threading.Thread:
        """Stop the server now (an outage) and start it again ``seconds`` later, from a
        thread (returned: join it before reading the server)."""
        self.run("pg_ctl", "-D", f"{self.folder}/data", "-m", "immediate", "-w", "stop")

        def start_again() -> None:
            time.sleep(seconds)
            self.start()

        thread = threading.Thread(target=start_again, daemon=True)
        thread.start()
        return thread

    def start(self) -> None:
        """Start the (stopped) server on its port with its options."""
        data, log = f"{self.folder}/data", f"{self.folder}/log"
        self.run("pg_ctl", "-D", data, "-o", self.options, "-l", log, "-w", "start")
        self.run("pg_isready", "-h", "127.0.0.1", "-p", str(self.port), "-t", "30")


def start_server(max_prepared_transactions: int) -> PostgresServer:
    """initdb a cluster in a new temporary folder and start it on a free loopback port."""
    bindir = postgres_bindir()
    if bindir is None:
        pytest.fail("PostgreSQL is not installed (initdb, pg_ctl): apt-get install postgresql")
    folder = tempfile.mkdtemp(prefix="flintlock-pg-")
    os.chmod(folder, 0o700)
    if os.geteuid() == 0:  # initdb refuses root: the Debian package made a postgres user
        shutil.chown(folder, "postgres", "postgres")
    server = PostgresServer(folder, free_port(), bindir)
    server.run("initdb", "-D", f"{folder}/data", "-U", "postgres", "-A", "trust", "-E", "UTF8")
    server.options = (
        f"-c max_prepared_transactions={max_prepared_transactions} "
        f"-c listen_addresses=127.0.0.1 -p {server.port} -k {folder} "
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    )
    server.start()
    return server


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A server allowing prepared transactions, for the whole session."""
    server = start_server(max_prepared_transactions=20)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres_without_2pc() -> Iterator[PostgresServer]:
    """A server with ``max_prepared_transactions = 0`` (PostgreSQL's default)."""
    server = start_server(max_prepared_transactions=0)
    yield server
    server.stop()


@pytest.fixture
def pg_conninfo(postgres: PostgresServer) -> Iterator[str]:
    """The conninfo of a fresh database on the session's server, dropped after the test."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres.conninfo(), autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    yield postgres.conninfo(name)
    with psycopg.connect(postgres.conninfo(), autocommit=True) as connection:
        for (gid,) in connection.execute(
            "SELECT gid FROM pg_prepared_xacts WHERE database = %s", [name]
        ).fetchall():
            with psycopg.connect(postgres.conninfo(name), autocommit=True) as owner:
                owner.execute(f"ROLLBACK PREPARED '{gid}'")
        connection.execute(f"DROP DATABASE {name} WITH (FORCE)")
