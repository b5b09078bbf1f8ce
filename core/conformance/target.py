"""What a sink author writes to run the conformance kit: a ``SinkTarget``, the adapter
between the kit and one sink — make a sink on an output, read back what readers see,
list what the sink's jobs left behind."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import pyarrow as pa

from flintlock.core.api.sink import TwoPhaseCommitSink

SinkT = TypeVar("SinkT", bound=TwoPhaseCommitSink[Any, Any])
"""The sink class under test (``SinkTarget[FileSink]``)."""

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
"""The rows every scenario writes: an id (what the kit counts) and a name."""


def rows(ids: Sequence[int], schema: pa.Schema = SCHEMA) -> pa.RecordBatch:
    """The batch of the kit's rows with ``ids``."""
    names = [f"row-{i}" for i in ids]
    return pa.record_batch([pa.array(ids, pa.int64()), pa.array(names, pa.string())], schema=schema)


@dataclass(frozen=True)
class OutputPlace:
    """One output a scenario writes (a folder, a table, a topic): ``name`` is unique in
    the process and fits an identifier (lower-case letters, digits and ``_``, starting
    with a letter); ``folder`` is a fresh empty local folder of its own."""

    name: str
    folder: str


class SinkTarget(ABC, Generic[SinkT]):
    """The adapter the kit drives a sink through: three methods, typed by the sink class
    (``class FileTarget(SinkTarget[FileSink])``).

    ``make_sink`` is called again for the same place whenever a driver starts (a restart
    builds its sinks anew) and when another job writes the same place, so the sink it
    returns must add to existing output (an ``append`` mode)."""

    schema: pa.Schema = SCHEMA
    """The stream's schema, set as the sink's ``input_schema`` (as ``sink_to`` does)."""

    @property
    def label(self) -> str:
        """How failures name the sink under test."""
        return type(self).__name__

    @abstractmethod
    def make_sink(self, place: OutputPlace) -> SinkT:
        """A new sink object writing to ``place`` (a fresh output the first time)."""

    @abstractmethod
    def read_committed(self, sink: SinkT) -> pa.Table:
        """What a reader of the sink's output sees now: a table with the ``id`` column."""

    @abstractmethod
    def left_behind(self, sink: SinkT) -> list[str]:
        """What the jobs that wrote with this sink left that finished jobs must not leave
        (staging files, open or prepared transactions, staging tables); empty if clean."""
