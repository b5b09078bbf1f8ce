"""A real Spark standalone cluster for the tests: a master and two workers on 127.0.0.1,
started from the installed pyspark (``bin/spark-class``), each in a process group of its
own, stopped at the session's end (no local-cluster shortcut, no mock).

Fixtures: ``standalone_cluster`` (the session's cluster: its master URL and workers) and
``connect_server`` (a Spark Connect server on it, for one test). The commands are the
ones README's "A standalone cluster on one machine" gives.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from postgres_server import free_port

WORKERS = 2
START_SECONDS = 90.0


def spark_bin(program: str) -> str:
    """A script of the installed pyspark's ``bin/`` (spark-class, spark-submit)."""
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / program)


def master_command(port: int, webui_port: int) -> list[str]:
    """README's command that starts the master on loopback."""
    return [
        spark_bin("spark-class"),
        "org.apache.spark.deploy.master.Master",
        *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(webui_port)),
    ]


def worker_command(master_url: str, webui_port: int, work_dir: str) -> list[str]:
    """README's command that starts a worker of 1 core and 1 GB (two fit the machine's
    two cores), its executors' folders under ``work_dir``."""
    return [
        spark_bin("spark-class"),
        "org.apache.spark.deploy.worker.Worker",
        master_url,
        *("--host", "127.0.0.1", "--cores", "1", "--memory", "1g"),
        *("--webui-port", str(webui_port), "--work-dir", work_dir),
    ]


def submit_command(master_url: str, job: str, *job_args: str) -> list[str]:
    """README's ``spark-submit --master spark://... job.py``: one core per executor."""
    return [
        spark_bin("spark-submit"),
        "--master",
        master_url,
        "--executor-cores",
        "1",
        job,
        *job_args,
    ]


CONNECT_SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"


def connect_server_command(master_url: str, port: int, python: str) -> list[str]:
    """README's command that starts a Spark Connect server on the cluster: the driver of
    its clients' jobs, listening on loopback ``port``; its executors run ``python``."""
    return [
        spark_bin("spark-submit"),
        *("--master", master_url, "--executor-cores", "1", "--class", CONNECT_SERVER),
        *("--conf", "spark.connect.grpc.binding.address=127.0.0.1"),
        *("--conf", f"spark.connect.grpc.binding.port={port}"),
        *("--conf", f"spark.pyspark.python={python}"),
    ]


def cluster_environment(folder: str) -> dict[str, str]:
    """What the master, the workers and spark-submit run with: loopback only, the driver's
    Python this interpreter, logs and work dirs under the cluster's folder. No
    PYSPARK_PYTHON: the executors run the Python the job's driver names (flintlock's)."""
    environment = {key: value for key, value in os.environ.items() if key != "PYSPARK_PYTHON"}
    return {
        **environment,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": f"{folder}/local",
        "SPARK_LOG_DIR": f"{folder}/logs",
        "SPARK_DAEMON_JAVA_OPTS": "-XX:TieredStopAtLevel=1",  # as the tests' other JVMs
    }


@dataclass
class SparkProcess:
    """A master or worker JVM: its process (group leader) and its log file."""

    name: str
    process: subprocess.Popen[bytes]
    log: str

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole group: the JVM and what it started (executors, Python)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def tail(self) -> str:
        with open(self.log, errors="replace") as file:
            return f"--- {self.name} ({self.log}) ---\n" + file.read()[-3000:]


@dataclass
class StandaloneCluster:
    """A running standalone master and its workers."""

    folder: str
    port: int
    webui_port: int
    master: SparkProcess
    workers: list[SparkProcess] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def worker_pids(self) -> list[int]:
        return [worker.pid for worker in self.workers]

    def state(self) -> dict[str, object]:
        """The master's JSON status page (workers, applications)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=5) as r:
            document: dict[str, object] = json.load(r)
        return document

    def alive_workers(self) -> int:
        workers = self.state().get("workers", [])
        assert isinstance(workers, list)
        return sum(1 for worker in workers if worker.get("state") == "ALIVE")

    def start_worker(self) -> SparkProcess:
        """One more worker (1 core, 1 GB) with a work dir of its own under the folder."""
        number = len(self.workers)
        command = worker_command(self.url, free_port(), f"{self.folder}/worker-{number}")
        worker = launch(f"worker-{number}", command, self.folder)
        self.workers.append(worker)
        return worker

    def wait_for_workers(self, count: int) -> None:
        """Until the master lists ``count`` ALIVE workers; fail with the logs otherwise."""
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            dead = [p for p in [self.master, *self.workers] if not p.alive()]
            if dead:
                break
            try:
                if self.alive_workers() >= count:
                    return
            except OSError:
                pass  # the master's web UI is not up yet
            time.sleep(0.5)
        logs = "\n".join(p.tail() for p in [self.master, *self.workers])
        pytest.fail(f"the standalone cluster did not get {count} ALIVE workers:\n{logs}")

    def stop(self) -> None:
        for process in [*self.workers, self.master]:
            process.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


def launch(name: str, command: list[str], folder: str) -> SparkProcess:
    """Start ``command`` in a new process group, its output in ``<folder>/<name>.log``."""
    log = f"{folder}/{name}.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            command,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=cluster_environment(folder),
            start_new_session=True,
        )
    return SparkProcess(name, process, log)


def start_cluster(workers: int = WORKERS) -> StandaloneCluster:
    """A master on free loopback ports and ``workers`` workers, all ALIVE."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("Java is not installed: Spark's master and workers need Java 17+")
    folder = tempfile.mkdtemp(prefix="flintlock-standalone-")
    port, webui_port = free_port(), free_port()
    master = launch("master", master_command(port, webui_port), folder)
    cluster = StandaloneCluster(folder, port, webui_port, master)
    try:
        for _ in range(workers):
            cluster.start_worker()
        cluster.wait_for_workers(workers)
    except BaseException:
        cluster.stop()
        raise
    return cluster


@pytest.fixture(scope="session")
def standalone_cluster() -> Iterator[StandaloneCluster]:
    """The session's standalone master and two workers; a test that kills a worker
    starts a new one before it ends (``StandaloneCluster.start_worker``)."""
    cluster = start_cluster()
    yield cluster
    cluster.stop()


def listening(port: int) -> bool:
    """True if something accepts connections on the loopback ``port``."""
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def connect_server(standalone_cluster: StandaloneCluster) -> Iterator[str]:
    """A Spark Connect server whose master is the session's cluster, its executors
    running this interpreter; yields its ``sc://`` URL. Stopped at the test's end: while
    it runs, its executors hold every core of the cluster."""
    port = free_port()
    command = connect_server_command(standalone_cluster.url, port, sys.executable)
    server = launch("connect-server", command, standalone_cluster.folder)
    try:
        deadline = time.monotonic() + START_SECONDS
        while not listening(port):
            if not server.alive() or time.monotonic() > deadline:
                pytest.fail(f"the Spark Connect server did not start:\n{server.tail()}")
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.kill()
