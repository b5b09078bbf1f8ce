"""What the kafka source asks the brokers on the driver: a topic's partitions, their
earliest / end / by-timestamp offsets, and the consumer group's committed offsets.

Every question goes through one ``KafkaCluster`` (an AdminClient), and every failure
becomes a ``PluginError`` naming the broker, topic or partition, before Spark starts.
Offsets are keyed ``"topic:partition"`` (JSON-friendly: they live in checkpoints)."""

from __future__ import annotations

import logging
import re
from typing import Any

from flintlock import PluginError

log = logging.getLogger(__name__)

StartingOffsets = str | dict[str, Any]
"""``"earliest"``, ``"latest"``, ``{"timestamp": ms}`` or ``{topic: {partition: offset}}``."""


def confluent() -> Any:
    """The confluent_kafka module with its ``admin`` submodule loaded (``import
    confluent_kafka`` alone leaves it out), or a PluginError saying which extra to install."""
    try:
        import confluent_kafka
        import confluent_kafka.admin  # a submodule: not loaded by ``import confluent_kafka``
    except ImportError as error:  # pragma: no cover - the kafka extra is a test dependency
        raise PluginError(
            "from_kafka needs confluent-kafka: pip install 'flintlock[kafka]'"
        ) from error
    return confluent_kafka


def split_name(topic: str, partition: int) -> str:
    """The split (and checkpoint key) of one partition: ``topic:partition``."""
    return f"{topic}:{partition}"


def parse_split(name: str) -> tuple[str, int]:
    topic, _, partition = name.rpartition(":")
    return topic, int(partition)


class KafkaCluster:
    """The driver's view of the brokers at ``bootstrap_servers``."""

    def __init__(
        self, bootstrap_servers: str, client_config: dict[str, Any], timeout_seconds: float
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.config = {**client_config, "bootstrap.servers": bootstrap_servers}
        self.timeout = timeout_seconds
        self._admin: Any = None

    def admin(self) -> Any:
        if self._admin is None:
            self._admin = confluent().admin.AdminClient(self.config)
        return self._admin

    def partitions(self, topics: list[str] | None, pattern: str | None) -> list[str]:
        """The splits of ``topics`` (each must exist) or of every topic matching
        ``pattern``, sorted by topic and partition number."""
        try:
            metadata = self.admin().list_topics(timeout=self.timeout)
        except Exception as error:  # KafkaException: no broker answered
            raise PluginError(
                f"from_kafka: the Kafka brokers at {self.bootstrap_servers} did not answer "
                f"within {self.timeout} s: {error}"
            ) from error
        found = metadata.topics
        if pattern is not None:
            compiled = re.compile(pattern)
            topics = sorted(name for name in found if compiled.fullmatch(name))
        splits = []
        for topic in topics or []:
            about = found.get(topic)
            if about is None or about.error is not None:
                raise PluginError(
                    f"from_kafka: topic '{topic}' does not exist on {self.bootstrap_servers}"
                    + (f" ({about.error})" if about is not None else "")
                )
            splits += [split_name(topic, p) for p in sorted(about.partitions)]
        return sorted(splits, key=parse_split)

    def offsets(self, splits: list[str], spec: str, timestamp: int | None = None) -> dict[str, int]:
        """Each split's ``earliest`` offset, ``latest`` (the last stable offset: the end a
        read_committed consumer reaches) or first offset at ``timestamp`` or later (the
        end where there is none)."""
        if not splits:
            return {}
        kafka = confluent()
        offset_spec = kafka.admin.OffsetSpec
        chosen = {
            "earliest": offset_spec.earliest(),
            "latest": offset_spec.latest(),
            "timestamp": offset_spec.for_timestamp(timestamp or 0),
        }[spec]
        asked = {kafka.TopicPartition(*parse_split(s)): chosen for s in splits}
        try:
            futures = self.admin().list_offsets(
                asked,
                isolation_level=kafka.IsolationLevel.READ_COMMITTED,
                request_timeout=self.timeout,
            )
            answers = {
                split_name(tp.topic, tp.partition): future.result(timeout=self.timeout).offset
                for tp, future in futures.items()
            }
        except Exception as error:
            raise PluginError(
                f"from_kafka: cannot list the {spec} offsets of {', '.join(splits)} on "
                f"{self.bootstrap_servers}: {error}"
            ) from error
        if spec == "timestamp":  # -1: no record at or after the timestamp: start at the end
            ends = self.offsets([s for s, o in answers.items() if o < 0], "latest")
            answers.update(ends)
        return answers

    def starting_offsets(self, splits: list[str], starting: StartingOffsets) -> dict[str, int]:
        """Where each split starts, checked against the partitions' offsets."""
        if starting in ("earliest", "latest"):
            return self.offsets(splits, str(starting))
        if isinstance(starting, dict) and set(starting) == {"timestamp"}:
            stamp = starting["timestamp"]
            if not is_int(stamp) or stamp < 0:
                raise PluginError(f"from_kafka: starting timestamp {stamp!r} must be epoch ms")
            return self.offsets(splits, "timestamp", stamp)
        if not isinstance(starting, dict):
            raise PluginError(
                f"from_kafka: starting_offsets {starting!r} must be 'earliest', 'latest', "
                f"{{'timestamp': ms}} or {{topic: {{partition: offset}}}}"
            )
        return self._explicit(splits, starting)

    def _explicit(self, splits: list[str], starting: dict[str, Any]) -> dict[str, int]:
        """Explicit offsets per partition; partitions not named start at the earliest."""
        earliest, latest = self.offsets(splits, "earliest"), self.offsets(splits, "latest")
        chosen = dict(earliest)
        for topic, partitions in starting.items():
            if not isinstance(partitions, dict):
                raise PluginError(
                    f"from_kafka: starting_offsets['{topic}'] must map partitions to offsets"
                )
            for partition, offset in partitions.items():
                split = split_name(topic, int(partition))
                if split not in chosen:
                    raise PluginError(
                        f"from_kafka: starting offset for partition {partition} of topic "
                        f"'{topic}', which the source does not read (it reads {splits})"
                    )
                low, high = earliest[split], latest[split]
                if not is_int(offset) or not low <= offset <= high:
                    raise PluginError(
                        f"from_kafka: starting offset {offset!r} of topic '{topic}' partition "
                        f"{partition} is outside its offsets [{low}, {high}]"
                    )
                chosen[split] = offset
        return chosen

    def commit_group(self, group_id: str, offsets: dict[str, int]) -> None:
        """Commit ``offsets`` (next offset per split) to consumer group ``group_id``, for
        monitoring only: a failure is logged, never raised (as Flink does)."""
        kafka = confluent()
        consumer = None
        try:
            config = {**self.config, "group.id": group_id, "enable.auto.commit": False}
            consumer = kafka.Consumer(config)
            consumer.commit(
                offsets=[kafka.TopicPartition(*parse_split(s), o) for s, o in offsets.items()],
                asynchronous=False,
            )
        except Exception as error:
            log.warning("from_kafka: committing offsets to group %s failed: %s", group_id, error)
        finally:
            if consumer is not None:
                consumer.close()


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
