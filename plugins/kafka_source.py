"""The ``kafka`` source: Apache Kafka topics read with confluent-kafka (no JVM).

A split is one partition (``topic:partition``). Bounded (``KafkaSource``): each
partition from its starting offset to the end offset seen when the job is built.
Unbounded (``KafkaStreamSource``): before each epoch the driver asks the brokers for the
partitions' end offsets (the last stable offset: what read_committed reaches) and plans
``[next, end)`` per partition, capped by ``max_records_per_epoch``; the next offset per
partition is the enumerator's state, stored in every checkpoint, so a restore (at any
parallelism: partitions are dealt out per epoch) continues exactly there. Partitions
(and topics of a pattern) that appear while the job runs are read from their earliest
offset. Once a checkpoint completes, its offsets are committed to ``group_id``, for
monitoring only, as Flink's Kafka source does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from flintlock import EpochSplits, PluginError, Source, SourceReader, UnboundedSource, hookimpl
from flintlock.plugins.kafka_offsets import KafkaCluster, StartingOffsets, is_int
from flintlock.plugins.kafka_reader import KafkaRangeReader, record_schema, value_deserializer


@dataclass
class KafkaOptions:
    """What ``env.from_kafka`` was given, checked."""

    bootstrap_servers: str
    topics: list[str] | None = None
    topic_pattern: str | None = None
    starting_offsets: StartingOffsets = "earliest"
    value_format: Any = "bytes"
    schema: pa.Schema | None = None
    client_config: dict[str, Any] = field(default_factory=dict)
    max_records_per_epoch: int | None = None
    group_id: str | None = None
    batch_size: int = 10000
    timeout_seconds: float = 30.0

    def __post_init__(self) -> None:
        if not isinstance(self.bootstrap_servers, str) or not self.bootstrap_servers:
            raise PluginError("from_kafka: bootstrap_servers must be 'host:port[,host:port]'")
        if (self.topics is None) == (self.topic_pattern is None):
            raise PluginError("from_kafka takes one of topics=[...] or topic_pattern=")
        if self.topics is not None and (
            isinstance(self.topics, str) or not all(isinstance(t, str) for t in self.topics)
        ):
            raise PluginError(f"from_kafka: topics must be a list of names, not {self.topics!r}")
        limit = self.max_records_per_epoch
        if limit is not None and (not is_int(limit) or limit < 1):
            raise PluginError(f"from_kafka: max_records_per_epoch {limit!r} must be an int >= 1")

    def reader_config(self) -> dict[str, Any]:
        """The workers' consumer configuration (read_committed unless said otherwise)."""
        config = {**self.client_config, "bootstrap.servers": self.bootstrap_servers}
        if self.group_id is not None:
            config["group.id"] = self.group_id
        return config


class _KafkaTopics:
    """The driver's part both sources share: the brokers, the partitions, the schema."""

    def __init__(self, options: KafkaOptions) -> None:
        self.options = options
        self.deserializer = value_deserializer(options.value_format, options.schema)
        self.schema = record_schema(self.deserializer.value_type)
        self.cluster = KafkaCluster(
            options.bootstrap_servers, options.client_config, options.timeout_seconds
        )
        self.splits = self.cluster.partitions(options.topics, options.topic_pattern)
        self.start = self.cluster.starting_offsets(self.splits, options.starting_offsets)

    def __getstate__(self) -> dict[str, Any]:  # the AdminClient stays on the driver
        return {**self.__dict__, "cluster": None}

    def reader(self, ranges: dict[str, tuple[int, int]]) -> SourceReader:
        options = self.options
        return KafkaRangeReader(
            options.reader_config(),
            ranges,
            self.deserializer,
            options.batch_size,
            options.timeout_seconds,
        )


class KafkaSource(Source):
    """Bounded: each partition from its starting offset to its end seen at the build."""

    name = "kafka"

    def __init__(self, options: KafkaOptions) -> None:
        self.topics = _KafkaTopics(options)
        self.schema = self.topics.schema
        self.ends = self.topics.cluster.offsets(self.topics.splits, "latest")

    def create_reader(
        self, subtask_index: int, parallelism: int, positions: dict[str, int]
    ) -> SourceReader:
        topics = self.topics
        mine = topics.splits[subtask_index::parallelism]
        ranges = {s: (positions.get(s, topics.start[s]), self.ends[s]) for s in mine}
        # an empty partition is left out: it would hold per-partition watermarks back
        return topics.reader({s: (start, end) for s, (start, end) in ranges.items() if start < end})


class KafkaStreamSource(UnboundedSource):
    """Unbounded: per epoch, what the partitions received since the last one."""

    name = "kafka"

    def __init__(self, options: KafkaOptions) -> None:
        self.topics = _KafkaTopics(options)
        self.schema = self.topics.schema

    def initial_state(self, now_ms: int) -> dict[str, Any]:
        return {"offsets": dict(self.topics.start)}

    def plan_epoch(self, state: Any, now_ms: int, parallelism: int) -> EpochSplits:
        options = self.topics.options
        cluster = self._cluster()
        offsets = dict(state["offsets"])
        splits = cluster.partitions(options.topics, options.topic_pattern)
        added = [s for s in splits if s not in offsets]
        offsets.update(cluster.offsets(added, "earliest"))  # new partitions: from the start
        ends = cluster.offsets(splits, "latest")
        ranges = capped_ranges(offsets, ends, options.max_records_per_epoch)
        reading = [split for split in splits if split in ranges]
        assignments: list[list[Any]] = [[] for _ in range(parallelism)]
        for index, split in enumerate(reading):
            assignments[index % parallelism].append([split, *ranges[split]])
        offsets.update({s: end for s, (_, end) in ranges.items()})
        return EpochSplits(assignments, {"offsets": offsets})

    def _cluster(self) -> KafkaCluster:
        if self.topics.cluster is None:  # unpickled (a driver restored from a closure)
            options = self.topics.options
            self.topics.cluster = KafkaCluster(
                options.bootstrap_servers, options.client_config, options.timeout_seconds
            )
        return self.topics.cluster

    def create_epoch_reader(
        self, subtask_index: int, parallelism: int, splits: list[Any]
    ) -> SourceReader:
        return self.topics.reader({split: (start, end) for split, start, end in splits})

    def notify_checkpoint_complete(self, checkpoint_id: int, state: Any) -> None:
        """Commit the checkpoint's offsets to ``group_id`` (monitoring only)."""
        group = self.topics.options.group_id
        if group is not None and state:
            self._cluster().commit_group(group, dict(state["offsets"]))


def capped_ranges(
    offsets: dict[str, int], ends: dict[str, int], limit: int | None
) -> dict[str, tuple[int, int]]:
    """``[next, end)`` of each partition with records to read; with ``limit``, each
    partition's share of it in proportion to its backlog (at least one record)."""
    backlog = {s: ends[s] - offsets[s] for s in ends if ends[s] > offsets[s]}
    total = sum(backlog.values())
    ranges = {}
    for split, lag in backlog.items():
        take = lag if limit is None or total <= limit else max(1, limit * lag // total)
        ranges[split] = (offsets[split], offsets[split] + take)
    return ranges


def kafka_source(**options: Any) -> Source:
    """The source ``env.from_kafka`` builds: bounded or unbounded."""
    bounded = options.pop("bounded", False)
    checked = KafkaOptions(**options)
    return KafkaSource(checked) if bounded else KafkaStreamSource(checked)


@hookimpl
def flintlock_register_sources(register: Callable[[str, Any], None]) -> None:
    register("kafka", kafka_source)
