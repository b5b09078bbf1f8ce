"""A real Apache Kafka broker for the tests: KRaft mode (one process both broker and
controller), its jars fetched from Maven Central by ``mvn`` into the test cache on first
use (tests/jar_cache.py), its storage formatted in a temporary folder, started on free
loopback ports and stopped at the end (no mocks). Clients are confluent-kafka's.

Fixture: ``kafka``, the session's broker. ``start_broker()`` starts one of a test's own.
Topics are never created by a client's request (``auto.create.topics.enable=false``):
``kafka.create_topic(name, partitions)`` makes them, so a misspelt topic fails at once.
"""

from __future__ import annotations

import base64
import ctypes
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from jar_cache import maven_jars
from postgres_server import free_port

KAFKA_VERSION = "4.3.1"
JARS = [
    f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}",  # the server, with its dependencies
    "org.apache.logging.log4j:log4j-slf4j-impl:2.25.4",  # its log lines reach log4j2
]
JAVA_OPTIONS = [
    "-Xmx512m",
    "-Xms64m",
    "-XX:TieredStopAtLevel=1",  # C1 only: starts on less CPU, as the tests' Spark JVMs do
    "-XX:+UseSerialGC",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
]
SERVER_PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={folder}/data
auto.create.topics.enable=false
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=2000
num.network.threads=2
num.io.threads=2
num.recovery.threads.per.data.dir=1
log.flush.interval.messages=9223372036854775807
log.retention.ms=-1
"""
"""One node, replication factor 1 everywhere, one partition for the internal topics: it
starts in seconds. No time retention: the tests' records carry 2023 timestamps, and the
broker's five-minutely retention check would delete them mid-run (earliest = latest).
Transactions work as on a cluster (the exactly-once sink needs them)."""
LOG4J = """\
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {folder}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
"""


def kafka_jars() -> Path:
    """The folder of the broker's jars, fetched on first use (a few seconds with a warm
    ~/.m2, about a minute without)."""
    return maven_jars(f"kafka-{KAFKA_VERSION}", JARS) / "jars"


@dataclass
class KafkaBroker:
    """One running broker: its folder (config, data, logs), its ports and its process."""

    folder: Path
    port: int
    controller_port: int
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` for every client (127.0.0.1 only)."""
        return f"127.0.0.1:{self.port}"

    def config(self, **more: Any) -> dict[str, Any]:
        """A confluent-kafka client configuration for this broker, with ``more`` (write
        dots as underscores: ``isolation_level="read_committed"``)."""
        return {
            "bootstrap.servers": self.bootstrap,
            **{k.replace("_", "."): v for k, v in more.items()},
        }

    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient(self.config())

    def create_topic(self, name: str, partitions: int = 1) -> str:
        """Create topic ``name`` and wait until each of its partitions has a leader."""
        from confluent_kafka.admin import NewTopic

        admin = self.admin()
        futures = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)
        futures[name].result(timeout=60)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            topic = admin.list_topics(name, timeout=10).topics[name]
            leaders = [p.leader for p in topic.partitions.values()]
            if topic.error is None and len(leaders) == partitions and min(leaders) >= 0:
                return name
            time.sleep(0.05)
        raise TimeoutError(f"topic {name}: {partitions} partitions have no leader after 30 s")

    def records(self, topic: str, isolation_level: str = "read_committed") -> list[Any]:
        """Every record of ``topic`` a consumer of ``isolation_level`` reads, from the
        first offset to each partition's end, in (partition, offset) order."""
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = Consumer(
            self.config(
                group_id=f"reader-{uuid.uuid4().hex[:8]}",
                isolation_level=isolation_level,
                enable_partition_eof=True,
                enable_auto_commit=False,
            )
        )
        try:
            partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
            ended: set[int] = set()
            found = []
            deadline = time.monotonic() + 60
            while len(ended) < len(partitions):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{topic}: partitions {ended} of {len(partitions)} ended")
                message = consumer.poll(1.0)
                if message is None:
                    continue
                if message.error() is None:
                    found.append(message)
                elif message.error().code() == KafkaError._PARTITION_EOF:
                    ended.add(message.partition())
                else:
                    raise RuntimeError(f"reading {topic}: {message.error()}")
            return sorted(found, key=lambda m: (m.partition(), m.offset()))
        finally:
            consumer.close()

    def start(self) -> None:
        """Start the server on the formatted folder; return once it serves clients."""
        command = [
            "java",
            *JAVA_OPTIONS,
            f"-Dlog4j2.configurationFile={self.folder}/log4j2.properties",
        ]
        with open(self.folder / "stdout.log", "ab") as output:
            self.process = LAUNCHER.submit(
                subprocess.Popen,
                [
                    *command,
                    "-cp",
                    f"{kafka_jars()}/*",
                    "kafka.Kafka",
                    f"{self.folder}/server.properties",
                ],
                stdout=output,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_test_process,
            ).result()
        self.wait_until_serving()

    def wait_until_serving(self, seconds: float = 90) -> None:
        """Until the broker answers a metadata request (it listens only once it is
        registered with its controller and unfenced)."""
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + seconds
        while not port_open(self.port):
            self.check_running()
            if time.monotonic() > deadline:
                raise TimeoutError(f"Kafka on {self.bootstrap} did not listen in {seconds} s")
            time.sleep(0.1)
        admin = AdminClient(self.config())
        while time.monotonic() < deadline:
            self.check_running()
            try:
                if admin.list_topics(timeout=2).brokers:
                    return
            except Exception:  # KafkaException: not yet serving
                time.sleep(0.1)
        raise TimeoutError(
            f"Kafka on {self.bootstrap} did not serve in {seconds} s{self.log_tail()}"
        )

    def check_running(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"Kafka exited with {self.process.returncode}{self.log_tail()}")

    def log_tail(self) -> str:
        tails = []
        for name in ("stdout.log", "server.log"):
            if (self.folder / name).exists():
                tails.append(f"\n{name}:\n" + (self.folder / name).read_text()[-3000:])
        return "".join(tails)

    def stop(self, kill: bool = False) -> None:
        """Stop the server: a controlled shutdown, or ``kill`` -9 (a crash). Data stays."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        self.process = None

    def restart(self, kill: bool = False) -> None:
        """Stop (``kill``: crash) and start again on the same ports and data."""
        self.stop(kill)
        self.start()

    def remove(self) -> None:
        """Stop the server and delete its folder."""
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


LAUNCHER = ThreadPoolExecutor(1, thread_name_prefix="kafka-launcher")
"""The one thread that starts brokers: it lives as long as the test process. Linux sends
``PR_SET_PDEATHSIG`` when the *thread* that forked the child ends, so a broker started
(or restarted) from a short-lived thread would be stopped as soon as that thread ended."""


def die_with_test_process() -> None:
    """In the broker's process before Java starts: Linux sends it SIGTERM when the test
    process dies, so a killed pytest leaves no broker behind (``PR_SET_PDEATHSIG``; the
    broker is forked by ``LAUNCHER``, whose thread ends only with the process)."""
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)


def port_open(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def start_broker() -> KafkaBroker:
    """Format a new broker's storage in a temporary folder and start it on free ports."""
    folder = Path(tempfile.mkdtemp(prefix="flintlock-kafka-"))
    broker = KafkaBroker(folder, free_port(), free_port())
    ports = {"port": broker.port, "controller_port": broker.controller_port}
    (folder / "server.properties").write_text(SERVER_PROPERTIES.format(folder=folder, **ports))
    (folder / "log4j2.properties").write_text(LOG4J.format(folder=folder))
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    # "=": an id may begin with "-", which StorageTool would read as an option
    storage_tool = ["kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}"]
    done = subprocess.run(
        [
            "java",
            *JAVA_OPTIONS,
            "-cp",
            f"{kafka_jars()}/*",
            *storage_tool,
            "-c",
            f"{folder}/server.properties",
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"formatting Kafka's storage failed: {done.stdout}{done.stderr}")
    try:
        broker.start()
    except BaseException:
        broker.remove()
        raise
    return broker


@pytest.fixture(scope="session")
def kafka() -> Iterator[KafkaBroker]:
    """The session's broker (a test that restarts it must leave it serving)."""
    if shutil.which("java") is None:
        pytest.fail("Java is not installed (the Kafka broker needs Java 17+)")
    broker = start_broker()
    yield broker
    broker.remove()
