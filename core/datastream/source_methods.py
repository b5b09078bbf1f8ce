"""The environment's ``from_*`` methods: where a program's streams start (collections,
Arrow tables, DataFrames, Parquet, streaming DataFrames, sequences, tables, Kafka,
any Source).

A half of ``StreamExecutionEnvironment`` (environment.py), kept apart so that neither
module passes core/'s 400 lines. Every source is a source task reading splits, so each
method only builds a Source and its transformation; sources offered by plugins (Delta,
Iceberg) are found by name through the registry, as core never imports plugins/."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa

from flintlock.core.api.sink import TwoPhaseCommitSink
from flintlock.core.api.watermarks import WatermarkStrategy
from flintlock.core.datastream.checks import check_parallelism, is_int
from flintlock.core.datastream.datastream import DataStream
from flintlock.core.errors import GraphError
from flintlock.core.hooks.registry import Registry
from flintlock.core.plan.graph import InputEdge, Transformation
from flintlock.core.runtime.operator import StreamOperator
from flintlock.core.sources.parquet import ParquetSource
from flintlock.core.sources.sequence import SequenceSource
from flintlock.core.sources.source import CollectionSource, Source, SourceOperator
from flintlock.core.spark.sources import DataFrameSource
from flintlock.core.spark.streaming_source import StreamingDataFrameSource
from flintlock.core.storage.options import StorageOptions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from flintlock.core.datastream.environment import StreamExecutionEnvironment


class SourceMethods:
    """The source half of ``StreamExecutionEnvironment``: each method adds a source
    operator to the program and returns its stream."""

    parallelism: int
    max_parallelism: int
    storage_options: StorageOptions

    if TYPE_CHECKING:

        def _add(
            self,
            name: str,
            make_operator: Callable[[], StreamOperator],
            inputs: list[InputEdge],
            parallelism: int | None = None,
            is_source: bool = False,
            sink: TwoPhaseCommitSink[Any, Any] | None = None,
            is_sink: bool = False,
        ) -> Transformation: ...

        def _unique(self, name: str) -> str: ...

        registry: Registry

    def from_collection(
        self,
        rows: Sequence[dict[str, Any]],
        schema: pa.Schema | None = None,
        batch_size: int = 65536,
        watermark_strategy: WatermarkStrategy | None = None,
    ) -> DataStream:
        """A bounded stream of dicts (held in the job: for small data and tests).

        Typed by ``schema``, or by inference over every row; an empty collection with a
        schema is an empty stream of that schema."""
        if schema is not None and not isinstance(schema, pa.Schema):
            raise GraphError(f"from_collection: schema must be a pyarrow.Schema, not {schema!r}")
        _check_batch_size(batch_size, "from_collection")
        if isinstance(rows, pa.Table):
            raise GraphError("from_collection takes rows (dicts); use from_arrow for a Table")
        data = rows if isinstance(rows, list | tuple) else list(rows)
        return self.from_source(CollectionSource(data, batch_size, schema), watermark_strategy)

    def from_arrow(
        self,
        table: pa.Table,
        batch_size: int = 65536,
        watermark_strategy: WatermarkStrategy | None = None,
    ) -> DataStream:
        """A bounded stream of a pyarrow Table's rows."""
        if not isinstance(table, pa.Table):
            raise GraphError(f"from_arrow takes a pyarrow.Table, not {type(table).__name__}")
        _check_batch_size(batch_size, "from_arrow")
        return self.from_source(CollectionSource(table, batch_size), watermark_strategy)

    def from_dataframe(
        self,
        frame: DataFrame,
        name: str = "dataframe",
        parallelism: int | None = None,
        watermark_strategy: WatermarkStrategy | None = None,
    ) -> DataStream:
        """A bounded stream of a Spark DataFrame, read in place: each of its partitions is
        one source subtask (one Spark task), so its rows are not shuffled first.

        ``parallelism`` repartitions the input to that many subtasks instead. A frame with
        more partitions than ``max_parallelism`` is coalesced to that many (no shuffle).
        On Spark Connect, where the partitions cannot be counted, the input is
        repartitioned to ``parallelism`` or the environment's parallelism. A pandas
        DataFrame is converted once, on the driver (``pyarrow.Table.from_pandas``), and
        read like ``from_arrow``, split over ``parallelism`` subtasks.
        """
        if parallelism is not None:
            check_parallelism(parallelism, self.max_parallelism, "from_dataframe: parallelism")
        if _is_pandas(frame):
            return self._from_pandas(frame, name, parallelism, watermark_strategy)
        _check_spark_frame(frame)
        stream = self.from_source(DataFrameSource(), watermark_strategy, name=name)
        self._read_frame(stream, frame, parallelism, watermark_strategy)
        stream.transformation.parallelism_from_partitions = parallelism is None
        return stream

    def _from_pandas(
        self,
        frame: Any,
        name: str,
        parallelism: int | None,
        watermark_strategy: WatermarkStrategy | None,
    ) -> DataStream:
        """A pandas DataFrame's rows as an Arrow table in the job, one split per subtask."""
        try:
            table = pa.Table.from_pandas(frame, preserve_index=False)
        except (pa.ArrowException, TypeError, ValueError) as error:
            raise GraphError(
                f"from_dataframe: this pandas DataFrame cannot become Arrow ({error}): give "
                f"its columns one type each, or convert it to a Spark DataFrame yourself"
            ) from error
        table = table.replace_schema_metadata(None)  # pandas' own metadata is not the job's
        subtasks = parallelism or self.parallelism
        size = min(65536, max(1, -(-table.num_rows // subtasks)))
        source = CollectionSource(table, size)
        stream = self.from_source(source, watermark_strategy, name=name)
        stream.transformation.parallelism = subtasks
        return stream

    def _read_frame(
        self,
        stream: DataStream,
        frame: DataFrame,
        parallelism: int | None,
        watermark_strategy: WatermarkStrategy | None,
    ) -> None:
        """A source stream reads ``frame``: its Spark input, parallelism and schema."""
        transformation = stream.transformation
        transformation.spark_source = frame
        transformation.parallelism = parallelism or self.parallelism
        stream.schema = _dataframe_schema(frame)
        if watermark_strategy is not None and stream.schema is not None:
            watermark_strategy.check_schema(stream.schema, f"source '{transformation.name}'")

    def from_parquet(
        self,
        path: str,
        batch_size: int = 65536,
        watermark_strategy: WatermarkStrategy | None = None,
    ) -> DataStream:
        """A bounded stream of the Parquet files under ``path`` (local path or URI)."""
        _check_batch_size(batch_size, "from_parquet")
        source = ParquetSource(path, batch_size)
        try:
            source.schema  # noqa: B018 - read the dataset's schema now, on the driver
        except (OSError, pa.ArrowException) as error:
            raise GraphError(
                f"from_parquet: cannot read a Parquet dataset at '{path}': {error}"
            ) from error
        return self.from_source(source, watermark_strategy)

    def from_stream(
        self,
        frame: DataFrame,
        name: str = "spark-stream",
        parallelism: int | None = None,
        watermark_strategy: WatermarkStrategy | None = None,
    ) -> DataStream:
        """An unbounded stream of a Spark Structured Streaming DataFrame (rate, files,
        Kafka...): the job runs as its streaming query, one epoch per micro-batch, each
        micro-batch repartitioned to ``parallelism`` source subtasks."""
        if not getattr(frame, "isStreaming", False):
            raise GraphError(
                "from_stream takes a streaming DataFrame (spark.readStream...); read a "
                "batch DataFrame with from_dataframe"
            )
        if parallelism is not None:
            check_parallelism(parallelism, self.max_parallelism, "from_stream: parallelism")
        stream = self.from_source(StreamingDataFrameSource(), watermark_strategy, name=name)
        self._read_frame(stream, frame, parallelism, watermark_strategy)
        return stream

    def from_sequence(
        self,
        rows_per_second: float | None = None,
        end: int | None = None,
        start: int = 0,
        rows_per_epoch: int | None = None,
        watermark_strategy: WatermarkStrategy | None = None,
    ) -> DataStream:
        """An unbounded stream of ``id`` and ``event_time`` (``SequenceSource``): the job
        runs as epochs (``execute(trigger=...)``) until ``end`` or a stop."""
        source = SequenceSource(rows_per_second, end, start, rows_per_epoch)
        return self.from_source(source, watermark_strategy)

    def from_delta(
        self,
        uri: str,
        version: int | None = None,
        unbounded: bool = False,
        storage_options: dict[str, str] | None = None,
        batch_size: int = 65536,
        watermark_strategy: WatermarkStrategy | None = None,
    ) -> DataStream:
        """A stream of a Delta Lake table (the ``delta`` source plugin, delta-rs: no JVM).

        Bounded: the rows of one table version (``version``, else the newest when the job
        is built), one data file per split. Unbounded: the rows of that version, then epoch
        by epoch what later versions append (a version that removes files is refused); the
        version read so far is the source's offset in each checkpoint. ``storage_options``
        go to delta-rs (object stores)."""
        _check_batch_size(batch_size, "from_delta")
        factory = self.registry.get("source", "delta")
        options = self.storage_options.merged_for_deltalake(storage_options)
        source = factory(uri, version, unbounded, options, batch_size)
        return self.from_source(source, watermark_strategy)

    def from_iceberg(
        self,
        table: str,
        catalog: dict[str, str] | str | None = None,
        snapshot_id: int | None = None,
        unbounded: bool = False,
        batch_size: int = 65536,
        watermark_strategy: WatermarkStrategy | None = None,
        warehouse: str | None = None,
        catalog_name: str = "flintlock",
    ) -> DataStream:
        """A stream of an Apache Iceberg table ``namespace.name`` (the ``iceberg`` source
        plugin, pyiceberg: no JVM). ``catalog``: a pyiceberg catalog's properties (or its
        name in the pyiceberg configuration); or ``warehouse``: the folder of the embedded
        SQL catalog (``<warehouse>/catalog.db``, named ``catalog_name``), as
        ``IcebergSink`` takes them.
        Bounded: one snapshot (``snapshot_id``, else the current one). Unbounded: that
        snapshot, then epoch by epoch what later snapshots append; the snapshot id read so
        far is the source's offset in each checkpoint."""
        _check_batch_size(batch_size, "from_iceberg")
        factory = self.registry.get("source", "iceberg")
        source = factory(
            table, catalog, warehouse, snapshot_id, unbounded, batch_size, catalog_name
        )
        return self.from_source(source, watermark_strategy)

    def from_kafka(
        self,
        bootstrap_servers: str,
        topics: list[str] | None = None,
        topic_pattern: str | None = None,
        starting_offsets: str | dict[str, Any] = "earliest",
        bounded: bool = False,
        value_format: Any = "bytes",
        schema: pa.Schema | None = None,
        client_config: dict[str, Any] | None = None,
        max_records_per_epoch: int | None = None,
        group_id: str | None = None,
        name: str | None = None,
        watermark_strategy: WatermarkStrategy | None = None,
        batch_size: int = 10000,
        timeout_seconds: float = 30.0,
    ) -> DataStream:
        """A stream of Kafka ``topics`` (or every topic matching ``topic_pattern``), read by
        the ``kafka`` source plugin (confluent-kafka: no JVM), one partition per split:
        key, value (``value_format``: "bytes", "utf-8", "json" into ``schema``, or a
        ``ValueDeserializer``), topic, partition, offset, timestamp, headers.

        ``starting_offsets``: "earliest", "latest", ``{"timestamp": ms}`` or
        ``{topic: {partition: offset}}``. ``bounded``: stop at the end offsets seen now;
        else epoch by epoch, each reading up to the end offsets seen when it is planned
        (at most ``max_records_per_epoch``), the offsets in each checkpoint, committed to
        ``group_id`` once it completes. Event time is the record timestamp unless
        ``watermark_strategy`` says otherwise. Read read_committed unless
        ``client_config`` sets ``isolation.level``."""
        _check_batch_size(batch_size, "from_kafka")
        factory = self.registry.get("source", "kafka")
        source = factory(
            bootstrap_servers=bootstrap_servers,
            topics=None if topics is None else list(topics),
            topic_pattern=topic_pattern,
            starting_offsets=starting_offsets,
            bounded=bounded,
            value_format=value_format,
            schema=schema,
            client_config=dict(client_config or {}),
            max_records_per_epoch=max_records_per_epoch,
            group_id=group_id,
            batch_size=batch_size,
            timeout_seconds=timeout_seconds,
        )
        strategy = watermark_strategy or WatermarkStrategy.no_watermarks("timestamp")
        return self.from_source(source, strategy, name=name)

    def from_source(
        self,
        source: Source,
        watermark_strategy: WatermarkStrategy | None = None,
        name: str | None = None,
    ) -> DataStream:
        """A stream read by a Source plugin; its schema is known if the Source declares one."""
        if not isinstance(source, Source):
            raise GraphError(f"from_source takes a Source, not {type(source).__name__}")
        if watermark_strategy is not None and not isinstance(watermark_strategy, WatermarkStrategy):
            raise GraphError(
                f"watermark_strategy must be a WatermarkStrategy, not {watermark_strategy!r}"
            )
        label = self._unique(name or f"source:{source.name}")
        schema = source.schema
        if schema is not None and watermark_strategy is not None:
            watermark_strategy.check_schema(schema, f"source '{label}'")

        def make() -> StreamOperator:
            return SourceOperator(source, watermark_strategy, name=label)

        t = self._add(label, make, [], is_source=True)
        column = watermark_strategy.timestamp_column if watermark_strategy else None
        env = cast("StreamExecutionEnvironment", self)  # the one class this half is part of
        return DataStream(env, [(t, None, None)], timestamp_column=column, schema=schema)


def _check_batch_size(batch_size: Any, method: str) -> None:
    if not is_int(batch_size) or batch_size < 1:
        raise GraphError(f"{method}: batch_size {batch_size!r} must be an int >= 1")


def _is_pandas(frame: Any) -> bool:
    import sys

    pandas = sys.modules.get("pandas")  # if pandas is not imported, frame is no pandas one
    return pandas is not None and isinstance(frame, pandas.DataFrame)


def _check_spark_frame(frame: Any) -> None:
    from pyspark.sql import DataFrame as SparkDataFrame  # classic and Connect alike

    if not isinstance(frame, SparkDataFrame):
        raise GraphError(
            f"from_dataframe takes a Spark DataFrame (or a pandas one, converted), not "
            f"{type(frame).__name__}: use from_arrow for a pyarrow.Table, from_collection "
            f"for a list of dicts"
        )


def _dataframe_schema(frame: DataFrame) -> pa.Schema | None:
    """The Arrow schema of the batches Spark hands ``mapInArrow`` for ``frame`` (None if
    pyspark cannot say, e.g. a type without an Arrow conversion)."""
    try:
        from pyspark.sql.pandas.types import to_arrow_schema

        schema = frame.schema
        text = schema.simpleString()  # the settings matter for these types only
        timezone, large = None, False
        if any(kind in text for kind in ("timestamp", "string", "binary", "char", "variant")):
            conf = frame.sparkSession.conf
            timezone = conf.get("spark.sql.session.timeZone")
            large = (
                str(conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false")).lower()
                == "true"
            )
        return to_arrow_schema(schema, timezone=timezone, prefers_large_types=large)
    except Exception:
        return None
