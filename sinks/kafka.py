"""KafkaSink: a stream's rows as Kafka records, exactly once or at least once.

Exactly once (Flink's write-ahead pattern plus Kafka's transactions): a Kafka transaction
cannot be resumed by another process, so tasks do not hold one. Each subtask stages the
checkpoint's rows as an Arrow IPC file in the job's checkpoint storage; its committable
names the file with its size and row count. Once the checkpoint completed, the committer
on the driver produces every staged row of it in ONE transaction with a stable
transactional id per (job, sink), with the checkpoint id as a marker group's offset in
the same transaction (kafka_commit.py): a ``read_committed`` consumer sees a checkpoint's
rows all at once, once, after any crash. At least once: tasks produce straight to the
topic and flush at pre-commit (a restarted epoch may send rows again)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

import pyarrow as pa
import pyarrow.fs as pafs

from flintlock import SinkOutputError, TwoPhaseCommitSink, hookimpl
from flintlock.plugin_api import (
    CheckpointStorage,
    CommitContext,
    OutputCheckContext,
    SinkWriterContext,
    list_folder,
    safe_name,
)
from flintlock.sinks import kafka_commit
from flintlock.sinks.kafka_records import (
    JSON_ROW,
    PRODUCER_DEFAULTS,
    DeliveryCounter,
    RecordLayout,
)
from flintlock.sinks.optional import require
from flintlock.sinks.staged_files import read_staged

DELIVERIES = ("exactly-once", "at-least-once")
FLUSH_SECONDS = 120.0
"""How long an at-least-once pre-commit waits for the broker to take every record."""


class StagedKafkaRows(TypedDict):
    """An exactly-once committable: one subtask's staged rows of one checkpoint."""

    path: str
    rows: int
    bytes: int
    subtask: int


@dataclass
class _Transaction:
    """One subtask's checkpoint: the staged file (exactly once) or a producer (at least)."""

    context: SinkWriterContext
    checkpoint_id: int
    path: str = ""
    stream: Any = None
    writer: Any = None
    rows: int = 0
    producer: DeliveryCounter | None = None
    closed: bool = field(default=False)


class KafkaSink(TwoPhaseCommitSink[_Transaction, StagedKafkaRows]):
    """Writes rows to the Kafka topic ``topic`` of ``bootstrap_servers``.

    A record's key is the ``key`` column (None: no key), its value the ``value`` column
    (``"json"``: the whole row as a JSON object; None: no value); bytes go as they are,
    strings as UTF-8, other values as JSON. ``headers`` maps header names to columns;
    ``partition`` names an integer column of explicit partitions (else the partitioner,
    ``producer_config={"partitioner": ...}``, murmur2 by key as Java clients by default);
    ``topic_column`` a string column of per-row topics (``topic`` still names the topic
    the exactly-once marker is kept on). ``delivery="exactly-once"`` (default) makes rows
    visible to ``read_committed`` consumers when their checkpoint completes;
    ``"at-least-once"`` sends them as they come and flushes at each checkpoint.
    Topics must exist: the sink checks them before Spark starts and never creates one."""

    name = "kafka"
    committer_type: type[kafka_commit.TransactionalCommitter] = kafka_commit.TransactionalCommitter
    """The driver's transactional committer (a subclass may observe its steps)."""

    def __init__(
        self,
        topic: str,
        bootstrap_servers: str,
        *,
        key: str | None = None,
        value: str | None = JSON_ROW,
        headers: Mapping[str, str] | None = None,
        partition: str | None = None,
        topic_column: str | None = None,
        delivery: str = "exactly-once",
        producer_config: Mapping[str, Any] | None = None,
    ) -> None:
        if delivery not in DELIVERIES:
            raise SinkOutputError(f"KafkaSink delivery={delivery!r} is not one of {DELIVERIES}")
        reserved = {"transactional.id", "bootstrap.servers"} & set(producer_config or {})
        if reserved:
            raise SinkOutputError(
                f"KafkaSink: producer_config may not set {sorted(reserved)} (the sink sets "
                f"bootstrap.servers from its argument, transactional.id per job and sink)"
            )
        require("confluent_kafka", "kafka", "KafkaSink")
        self.topic = topic
        self.bootstrap_servers = bootstrap_servers
        self.layout = RecordLayout(topic, key, value, dict(headers or {}), partition, topic_column)
        self.delivery = delivery
        self.producer_config = dict(producer_config or {})
        self._committer: kafka_commit.TransactionalCommitter | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Tasks get the sink without the driver's producer (it cannot travel)."""
        return {**self.__dict__, "_committer": None}

    @property
    def exactly_once(self) -> bool:
        return self.delivery == "exactly-once"

    def client_config(self) -> dict[str, Any]:
        """The confluent-kafka configuration of every client the sink makes."""
        config = {**PRODUCER_DEFAULTS, **self.producer_config}
        return {**config, "bootstrap.servers": self.bootstrap_servers}

    def _who(self, sink_uid: str, job_name: str, checkpoint_id: int = 0) -> str:
        described = f"KafkaSink '{sink_uid}' of job '{job_name}' (topic {self.topic}"
        return described + (f", checkpoint {checkpoint_id})" if checkpoint_id else ")")

    def staging_dir(self, storage: CheckpointStorage, job_name: str, sink_uid: str) -> str:
        """Where this sink's writers stage the rows of job ``job_name``."""
        return f"{storage.job_dir(job_name)}/kafka-staging/{safe_name(sink_uid or 'sink')}"

    # ---- writer side (tasks) ----

    def begin_transaction(self, context: SinkWriterContext, checkpoint_id: int) -> _Transaction:
        transaction = _Transaction(context, checkpoint_id)
        task = context.task
        if self.exactly_once:
            transaction.path = (
                f"{self.staging_dir(context.storage, task.job_name, context.sink_uid)}/"
                f"{task.run_id}-chk{checkpoint_id}-{task.subtask_index}-{task.attempt_id}.arrow"
            )
        else:
            from confluent_kafka import Producer

            config = {"enable.idempotence": True, **self.client_config()}
            who = self._who(context.sink_uid, task.job_name, checkpoint_id)
            transaction.producer = DeliveryCounter(Producer(config), who)
        return transaction

    def write(self, transaction: _Transaction, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        task = transaction.context.task
        who = self._who(transaction.context.sink_uid, task.job_name, transaction.checkpoint_id)
        if transaction.producer is not None:
            transaction.producer.produce_batch(self.layout.produce_arguments(batch, who))
            return
        self.layout.check_schema(batch.schema, who)
        if transaction.writer is None:
            filesystem = transaction.context.storage.filesystem
            filesystem.create_dir(transaction.path.rsplit("/", 1)[0], recursive=True)
            transaction.stream = filesystem.open_output_stream(transaction.path)
            transaction.writer = pa.ipc.new_file(transaction.stream, batch.schema)
        transaction.writer.write_batch(batch)
        transaction.rows += batch.num_rows

    def finish(self, transaction: _Transaction) -> None:
        if transaction.producer is not None:
            transaction.producer.flush(FLUSH_SECONDS)

    def pre_commit(self, transaction: _Transaction) -> list[StagedKafkaRows]:
        if transaction.producer is not None:  # at least once: every record acknowledged
            transaction.producer.flush(FLUSH_SECONDS)
            return []
        if transaction.writer is None:
            return []
        self._close(transaction)
        storage = transaction.context.storage
        size = storage.filesystem.get_file_info(transaction.path).size
        return [
            {
                "path": transaction.path,
                "rows": transaction.rows,
                "bytes": size,
                "subtask": transaction.context.task.subtask_index,
            }
        ]

    def abort(self, transaction: _Transaction) -> None:
        if transaction.producer is not None:  # what was sent stays sent: at least once
            transaction.producer.producer.purge()
            return
        if transaction.writer is None:
            return
        self._close(transaction)
        filesystem = transaction.context.storage.filesystem
        if filesystem.get_file_info(transaction.path).type == pafs.FileType.File:
            filesystem.delete_file(transaction.path)

    def _close(self, transaction: _Transaction) -> None:
        if not transaction.closed:
            transaction.closed = True
            transaction.writer.close()
            transaction.stream.close()

    # ---- committer side (driver) ----

    def check_output(self, context: OutputCheckContext) -> None:
        """Before Spark starts: the stream has the named columns, the brokers answer, the
        topic exists, and (exactly once) the transaction log can be written."""
        who = self._who(context.sink_uid, context.job_name)
        if self.input_schema is not None:
            self.layout.check_schema(self.input_schema, who)
        kafka_commit.check_brokers(self.client_config(), [self.topic], self.exactly_once, who)

    def committer(self, who: str) -> kafka_commit.TransactionalCommitter:
        """The driver's transactional producer, made once per sink object."""
        if self._committer is None:
            self._committer = self.committer_type(self.client_config(), self.topic, who)
        self._committer.who = who
        return self._committer

    def commit(self, context: CommitContext, committables: list[StagedKafkaRows]) -> None:
        """Produce the checkpoint's staged rows in one transaction with its marker,
        unless the marker shows it sent; then delete the staged files."""
        if not self.exactly_once or not committables:
            return
        who = self._who(context.sink_uid, context.job_name, context.checkpoint_id)
        ordered = sorted(committables, key=lambda c: (c["subtask"], c["path"]))
        storage = context.storage

        def batches() -> Iterator[pa.RecordBatch]:
            for file in ordered:
                yield from read_staged(storage, file, context).to_batches()

        def send(counter: DeliveryCounter, batch: pa.RecordBatch) -> None:
            counter.produce_batch(self.layout.produce_arguments(batch, who))

        self.committer(who).commit(context, batches, send)
        for file in ordered:  # sent: the staged files are not needed again
            if storage.exists(file["path"]):
                storage.filesystem.delete_file(file["path"])

    def abort_uncommitted(self, context: CommitContext, keep: list[StagedKafkaRows]) -> None:
        """Delete this job's staged files that no completed checkpoint references, and
        (exactly once) fence the transactional id: a transaction a dead driver left open
        is aborted, so ``read_committed`` consumers are not held back by it."""
        if not self.exactly_once:
            return
        kept = {file["path"] for file in keep}
        storage = context.storage
        staging = self.staging_dir(storage, context.job_name, context.sink_uid)
        for info in list_folder(storage.filesystem, staging):
            if info.type == pafs.FileType.File and info.path not in kept:
                storage.filesystem.delete_file(info.path)
        self.committer(self._who(context.sink_uid, context.job_name)).ready(context)


@hookimpl
def flintlock_register_sinks(register: Callable[[str, Any], None]) -> None:
    register("kafka", KafkaSink)
