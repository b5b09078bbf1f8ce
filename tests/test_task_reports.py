"""The REPORT messages a subtask sends the driver, typed on both sides: a lifecycle
phase report and a plugin's report round-trip through JSON as the message protocol
carries them, and a damaged one is a flintlock error naming what it got."""

from __future__ import annotations

import pytest

from flintlock.core.errors import ChannelError, PluginError
from flintlock.core.exchange.messages import decode_json, encode_json
from flintlock.core.exchange.reports import PhaseReport
from flintlock.core.hooks.reports import PluginReport


def test_a_phase_report_round_trips_and_names_its_attempt() -> None:
    report = PhaseReport("map -> sink", 1, 7, {"open": [1.5, 2.0], "close": [3.0, 3.25]})
    document = decode_json(encode_json(report.to_json()))
    assert PhaseReport.carried_by(document)
    assert PhaseReport.from_json(document) == report
    assert report.attempt == ("map -> sink", 1, 7)


def test_a_plugin_report_round_trips_and_is_not_a_phase_report() -> None:
    report = PluginReport(2, "map:1:7", {"rows": 12, "seen": ["a", "b"]})
    document = decode_json(encode_json(report.to_json()))
    assert not PhaseReport.carried_by(document)
    assert PluginReport.from_json(document) == report


@pytest.mark.parametrize(
    "document",
    [
        {"lifecycle_phases": {"open": [1.0, 2.0]}, "task_name": "map", "subtask_index": 0},
        {
            "lifecycle_phases": {"open": "soon"},
            "task_name": "map",
            "subtask_index": 0,
            "attempt_id": 3,
        },
    ],
)
def test_a_damaged_phase_report_is_a_channel_error(document: dict[str, object]) -> None:
    with pytest.raises(ChannelError, match=r"a damaged phase report .*'task_name': 'map'"):
        PhaseReport.from_json(document)


def test_a_damaged_plugin_report_is_a_plugin_error() -> None:
    with pytest.raises(PluginError, match=r"a damaged plugin report \('data'\)"):
        PluginReport.from_json({"plugin": 0, "task": "map:0:1"})
