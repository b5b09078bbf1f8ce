"""An epoch's part of the plan (what reused epoch stages receive per epoch) and the
driver's check of what the epoch's last stage sends it."""

from __future__ import annotations

import pyarrow as pa
import pytest
from test_routing_and_messages import two_vertex_plan

from flintlock.core.checkpoint.snapshots import TaskRestore
from flintlock.core.errors import ChannelError, FlintlockError
from flintlock.core.events import CheckpointBarrier
from flintlock.core.exchange.messages import ACK_VERTEX, MESSAGE_SCHEMA, Kind, check_for_driver
from flintlock.core.plan.execution import EPOCH_FIELDS
from flintlock.core.spark.task_plan import encoded_layout, plan_from_property, with_layout


def next_epoch(plan, checkpoint_id: int):  # type: ignore[no-untyped-def]
    """The same run's plan for a later epoch: new barrier, restores and root."""
    restore = TaskRestore(checkpoint_id - 1, [], aborted=[checkpoint_id])
    return plan.with_epoch_part(
        {
            **plan.epoch_part(),
            "epoch": checkpoint_id,
            "barrier": CheckpointBarrier(checkpoint_id, "savepoint", False),
            "restores": {(1, 0): restore},
            "snapshot_root": f"/savepoints/savepoint-{checkpoint_id}",
        }
    )


def test_a_task_rebuilds_the_epochs_plan_from_the_template_and_the_encoded_part() -> None:
    template = two_vertex_plan()
    later = next_epoch(template, 7)
    rebuilt = template.for_epoch(later.encoded_epoch_part())
    for name in EPOCH_FIELDS:
        assert getattr(rebuilt, name) == getattr(later, name), name
    assert (rebuilt.barrier.checkpoint_id, rebuilt.barrier.kind) == (7, "savepoint")
    assert rebuilt.graph is template.graph  # the layout is the template's
    assert rebuilt.stage_widths == template.stage_widths


def test_plans_share_stages_only_within_one_run_layout() -> None:
    template = two_vertex_plan()
    assert next_epoch(template, 3).same_layout(template)
    other_run = template.with_epoch_part(template.epoch_part())
    other_run.run_id = "another-run"
    assert not other_run.same_layout(template)
    rebuilt_graph = two_vertex_plan()  # an equal but new graph: a new layout
    assert not rebuilt_graph.same_layout(template)


def test_a_reused_stage_without_the_epochs_part_is_an_error_not_an_old_epoch() -> None:
    with pytest.raises(FlintlockError, match=r"flintlock\.epoch\.plan"):
        two_vertex_plan().for_epoch(None)


def test_a_shared_stage_gets_the_runs_layout_and_the_epochs_part_from_one_property() -> None:
    template = two_vertex_plan()
    later = next_epoch(template, 9)
    layout = encoded_layout(later)  # the layout leaves the epoch part out
    rebuilt = plan_from_property(with_layout(layout, later.encoded_epoch_part()))
    for name in EPOCH_FIELDS:
        assert getattr(rebuilt, name) == getattr(later, name), name
    assert (rebuilt.job_name, rebuilt.run_id, rebuilt.stage_widths) == (
        template.job_name,
        template.run_id,
        template.stage_widths,
    )
    assert [v.name for v in rebuilt.vertices.values()] == [
        v.name for v in template.vertices.values()
    ]
    bare = plan_from_property(with_layout(layout, template.layout_only().encoded_epoch_part()))
    assert (bare.epoch, bare.restores, bare.snapshot_root) == (0, {}, None)


def test_a_shared_stage_without_its_plan_is_an_error_naming_the_property() -> None:
    layout_only = encoded_layout(two_vertex_plan())
    for text in (None, "", layout_only):  # none, empty, or an epoch part without layout
        with pytest.raises(FlintlockError, match=r"no plan in the 'flintlock\.epoch\.plan'"):
            plan_from_property(text)


def messages(dest_vertices: list[int]) -> pa.Table:
    rows = len(dest_vertices)
    columns = {f.name: pa.array([0] * rows, f.type) for f in MESSAGE_SCHEMA if f.name != "payload"}
    columns["dest_vertex"] = pa.array(dest_vertices, pa.int32())
    columns["kind"] = pa.array([int(Kind.ACK)] * rows, pa.int32())
    columns["payload"] = pa.array([b"{}"] * rows, pa.binary())
    return pa.table(columns, schema=MESSAGE_SCHEMA)


def test_the_driver_takes_acknowledgements_and_refuses_a_message_for_a_vertex() -> None:
    check_for_driver(messages([ACK_VERTEX, ACK_VERTEX]))
    with pytest.raises(ChannelError, match=r"1 message\(s\) for vertex 2"):
        check_for_driver(messages([ACK_VERTEX, 2]))
