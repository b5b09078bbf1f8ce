"""KafkaSink's committer on the driver: a checkpoint's staged rows produced in ONE Kafka
transaction, together with a marker that says the checkpoint was sent.

The producer's ``transactional.id`` is stable per (job, sink), so the first thing a new
driver does, ``init_transactions``, fences the producer of a dead driver and aborts (or
lets complete) the transaction it left open. The marker is the committed offset of the
consumer group ``flintlock-<job id>-<sink uid>`` on partition 0 of the sink's topic: the
checkpoint id, committed inside the transaction (``send_offsets_to_transaction``), so
the rows and the marker become visible together or not at all. A replayed commit reads
the marker first and skips checkpoints already sent: commits are idempotent. The group
never joins (a consumer that never polls gives the group metadata; the broker takes a
simple group's transactional offset commit)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from flintlock import SinkOutputError
from flintlock.plugin_api import CommitContext, safe_name
from flintlock.sinks.kafka_records import DeliveryCounter

CONNECTION_SETTINGS = ("bootstrap.servers", "security.", "sasl.", "ssl.", "client.", "socket.")
"""The producer settings the driver's consumers and admin client share (how to reach and
authenticate to the brokers); producer-only ones would only draw librdkafka warnings."""
TIMEOUT = 60.0
"""Seconds the driver waits for the broker in one step (init, commit, a read)."""
HUNG_GRACE = 30.0
"""Seconds past a call's own timeout after which it counts as hung (``kafka_step``)."""
RETRY_PAUSE, MAX_RETRY_PAUSE = 0.1, 2.0
"""Seconds between tries of a step the broker answered with a retriable error."""
NO_OFFSET = -1001
"""What ``Consumer.committed`` returns for a group that never committed the partition."""


def connection_config(config: dict[str, Any]) -> dict[str, Any]:
    """The settings of ``config`` a consumer or admin client needs to reach the brokers."""
    return {k: v for k, v in config.items() if k.startswith(CONNECTION_SETTINGS)}


def transactional_id(job_id: str, sink_uid: str) -> str:
    """The producer's id for (job, sink): the same in every run of the job."""
    return f"flintlock-{job_id}-{safe_name(sink_uid or 'sink')}"


def marker_group(job_id: str, sink_uid: str) -> str:
    """The consumer group whose committed offset is the last checkpoint sent."""
    return transactional_id(job_id, sink_uid)


class TransactionalCommitter:
    """One sink's transactional producer on the driver, made (and fenced in) once."""

    timeout: float = TIMEOUT
    """Seconds the driver waits for the broker in one step (a subclass may say less)."""
    grace: float = HUNG_GRACE
    """Seconds past ``timeout`` after which a blocked step counts as hung."""

    def __init__(self, config: dict[str, Any], marker_topic: str, who: str) -> None:
        self.config = config
        self.marker_topic = marker_topic
        self.who = who
        self.producer: Any = None
        self.txn_id = ""
        self.hung = False

    def ready(self, context: CommitContext) -> Any:
        """The producer for the context's (job, sink), ``init_transactions`` done: every
        earlier producer with its id is fenced, its open transaction ended."""
        txn_id = transactional_id(context.job_id, context.sink_uid)
        if self.producer is not None and self.txn_id == txn_id:
            return self.producer
        from confluent_kafka import Producer

        producer = Producer({**self.config, "transactional.id": txn_id, "enable.idempotence": True})
        self._kafka("init_transactions", lambda: producer.init_transactions(self.timeout))
        self.producer, self.txn_id = producer, txn_id
        return producer

    def sent_up_to(self, context: CommitContext) -> int:
        """The last checkpoint id whose rows the marker group says were sent (0: none)."""
        from confluent_kafka import Consumer, TopicPartition

        group = marker_group(context.job_id, context.sink_uid)
        consumer = Consumer(
            {**connection_config(self.config), "group.id": group, "enable.auto.commit": False}
        )
        try:
            found = self._kafka(
                "reading the marker",
                lambda: consumer.committed([TopicPartition(self.marker_topic, 0)], self.timeout),
            )
        finally:
            consumer.close()
        offset = found[0].offset
        return 0 if offset == NO_OFFSET or offset < 0 else int(offset)

    def commit(
        self,
        context: CommitContext,
        batches: Callable[[], Iterator[pa.RecordBatch]],
        send: Callable[[DeliveryCounter, pa.RecordBatch], None],
    ) -> bool:
        """Send the checkpoint's rows (``batches``, each through ``send``) and the marker
        in one transaction, unless the marker says it was sent; True if sent now."""
        producer = self.ready(context)
        if self.sent_up_to(context) >= context.checkpoint_id:
            return False
        from confluent_kafka import Consumer, TopicPartition

        group = marker_group(context.job_id, context.sink_uid)
        marker_consumer = Consumer({**connection_config(self.config), "group.id": group})
        try:
            producer.begin_transaction()
            counter = DeliveryCounter(producer, self.who)
            for batch in batches():
                send(counter, batch)
            self.before_commit(context, counter)
            marker = TopicPartition(self.marker_topic, 0, context.checkpoint_id)
            metadata = marker_consumer.consumer_group_metadata()
            self._kafka(
                "sending the marker",
                lambda: producer.send_offsets_to_transaction([marker], metadata, self.timeout),
            )
            self._kafka("commit_transaction", lambda: producer.commit_transaction(self.timeout))
        except BaseException:
            self._abort()
            raise
        finally:
            marker_consumer.close()
        return True

    def before_commit(self, context: CommitContext, counter: DeliveryCounter) -> None:
        """Wait until every row of the open transaction is at the broker (it is not
        committed yet: a test kills its driver here)."""
        counter.flush(self.timeout)

    def _abort(self) -> None:
        """After a failed step: abort the open transaction; a producer that cannot (fenced,
        fatal) or whose step hung is dropped, and the next commit makes and fences in a
        new one (its ``init_transactions`` ends the open transaction)."""
        if self.hung:
            self.producer, self.hung = None, False  # stuck in librdkafka: abort would block
            return
        try:
            self.producer.abort_transaction(self.timeout)
        except Exception:  # KafkaException: nothing open, fenced or fatal
            self.producer = None

    def _kafka(self, step: str, call: Callable[[], Any]) -> Any:
        """``call``, again while the broker answers with an error librdkafka marks
        retriable (a coordinator that moved or is loading), for up to ``timeout`` s; a
        step that failed only after ``timeout + grace`` s marks the producer hung."""
        started = time.monotonic()
        try:
            return kafka_step(call, f"{self.who}: {step}", self._where(), self.timeout, self.grace)
        except SinkOutputError:
            self.hung = time.monotonic() - started >= self.timeout + self.grace
            raise

    def _where(self) -> str:
        return (
            f"transactional.id {self.txn_id or '-'}, brokers {self.config.get('bootstrap.servers')}"
        )


COORDINATOR_MOVED = ("NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE")
"""Error names a consumer call (``committed``) returns without librdkafka's retriable
flag while the group coordinator moves or loads after a broker restart: tried again."""


def is_retriable(kafka_error: Any) -> bool:
    """Whether a step that failed with ``kafka_error`` may simply be made again."""
    if getattr(kafka_error, "retriable", lambda: False)():
        return True
    return getattr(kafka_error, "name", lambda: "")() in COORDINATOR_MOVED


def kafka_step(
    call: Callable[[], Any],
    what: str,
    where: str,
    timeout: float = TIMEOUT,
    grace: float = HUNG_GRACE,
) -> Any:
    """``call`` retried on retriable Kafka errors (librdkafka's transactional API says
    such a call may simply be made again) with doubling pauses until ``timeout`` s; any
    other error, or the last, as a SinkOutputError naming ``what`` and ``where``; so is
    a call still blocked ``timeout + grace`` s after it began."""
    from confluent_kafka import KafkaException

    deadline, pause = time.monotonic() + timeout, RETRY_PAUSE
    while True:
        try:
            return within(call, timeout + grace, f"{what} did not return within", where)
        except KafkaException as error:
            kafka_error = error.args[0]
            if not is_retriable(kafka_error) or time.monotonic() + pause > deadline:
                raise SinkOutputError(f"{what} failed ({where}): {kafka_error}") from error
        time.sleep(pause)
        pause = min(pause * 2, MAX_RETRY_PAUSE)


def within(call: Callable[[], Any], seconds: float, what: str, where: str) -> Any:
    """``call`` in a thread of its own, waited for ``seconds``: librdkafka's transactional
    calls were seen blocking minutes past their own timeout once the broker was killed
    mid-call (``send_offsets_to_transaction`` after a broker restart)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:  # handed to the caller below
            outcome["error"] = error

    thread = threading.Thread(target=run, name="flintlock-kafka-step", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise SinkOutputError(f"{what} {seconds:.0f} s ({where})")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def check_brokers(config: dict[str, Any], topics: list[str], transactional: bool, who: str) -> None:
    """Before Spark starts: the brokers answer, every topic exists, and (``transactional``)
    the transaction log can be written (its replication factor and min ISR fit the
    cluster's brokers, else ``init_transactions`` would wait until it times out)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType  # type: ignore[attr-defined]

    where = f"brokers {config.get('bootstrap.servers')}"
    admin = AdminClient({"socket.connection.setup.timeout.ms": 10000, **connection_config(config)})
    try:
        metadata = admin.list_topics(timeout=15)
    except KafkaException as error:
        raise SinkOutputError(f"{who}: the {where} do not answer: {error.args[0]}") from error
    missing = [t for t in topics if t not in metadata.topics or metadata.topics[t].error]
    if missing:
        raise SinkOutputError(
            f"{who}: the topic(s) {missing} do not exist on the {where}: KafkaSink does not "
            f"create topics (their partitions and replication are yours to choose); create "
            f"them first, e.g. kafka-topics.sh --create --topic {missing[0]}"
        )
    if not transactional or not metadata.brokers:
        return
    broker_id = str(next(iter(metadata.brokers)))
    try:
        found = admin.describe_configs([ConfigResource(ResourceType.BROKER, broker_id)])
        settings = next(iter(found.values())).result(timeout=15)
    except KafkaException:  # describing configs may be denied: not an error
        return
    brokers = len(metadata.brokers)
    for name in ("transaction.state.log.replication.factor", "transaction.state.log.min.isr"):
        entry = settings.get(name)
        if entry is not None and entry.value is not None and int(entry.value) > brokers:
            raise SinkOutputError(
                f"{who}: the {where} have {name}={entry.value} but {brokers} broker(s): the "
                f"transaction log cannot be written, so exactly-once commits would hang. "
                f"Lower it to at most {brokers} or use delivery='at-least-once'"
            )
