"""The ``jsonl`` sink: found by name, and passing flintlock's conformance kit for 2PC sinks
(one test per scenario, from ``SinkConformance``)."""

from __future__ import annotations

import os

import pyarrow as pa
from flintlock_example_plugin import JSONL_SINK, JsonLinesSink
from flintlock_example_plugin.jsonl_sink import committed_rows

from flintlock.plugin_api import build_plugin_manager, build_registry
from flintlock.testing import SCHEMA, OutputPlace, SinkConformance, SinkTarget


class JsonLinesTarget(SinkTarget[JsonLinesSink]):
    """The kit's adapter: a sink on a place, its published rows, its staging files."""

    def make_sink(self, place: OutputPlace) -> JsonLinesSink:
        return JsonLinesSink(place.folder)

    def read_committed(self, sink: JsonLinesSink) -> pa.Table:
        return pa.Table.from_pylist(committed_rows(sink.folder), schema=SCHEMA)

    def left_behind(self, sink: JsonLinesSink) -> list[str]:
        return [
            f"{root}/{name}"
            for root, _, names in os.walk(sink.folder)
            if "_staging-" in root
            for name in names
        ]


class TestJsonLinesSinkConformance(SinkConformance[JsonLinesSink]):
    def sink_target(self) -> JsonLinesTarget:
        return JsonLinesTarget()


def test_the_sink_is_registered_by_name() -> None:
    assert build_registry(build_plugin_manager()).get("sink", JSONL_SINK) is JsonLinesSink
