"""Keyed jobs on real local Spark give the same rows as the same logic in plain pyarrow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

from flintlock import KeyedProcessFunction, ValueStateDescriptor
from flintlock.core.datastream.environment import StreamExecutionEnvironment
from flintlock.sinks.files import FileSink

END = 2**62


class SumPerKey(KeyedProcessFunction):
    """Sums ``v`` per key in keyed state; a timer at the end of time emits each sum."""

    def open(self) -> None:
        self.total = self.runtime_context.get_state(
            ValueStateDescriptor("total", pa.int64(), default=0)
        )

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.total.update(self.total.value() + value["v"])
        ctx.timer_service().register_event_time_timer(END)

    def on_timer(self, timestamp: int, ctx: Any, out: Any) -> None:
        out.collect({"k": ctx.get_current_key(), "total": self.total.value()})


def expected_sums(table: pa.Table) -> dict[Any, int]:
    doubled = table.set_column(1, "v", pc.multiply(table.column("v"), 2))
    grouped = doubled.group_by("k").aggregate([("v", "sum")])
    return dict(
        zip(grouped.column("k").to_pylist(), grouped.column("v_sum").to_pylist(), strict=True)
    )


@pytest.mark.parametrize("key_kind", ["int", "str"])
def test_keyed_job_into_file_sink_matches_pyarrow(
    spark: Any, tmp_path: Path, key_kind: str
) -> None:
    n = 5000
    keys = [i * 7 % 37 for i in range(n)]
    table = pa.table(
        {
            "k": keys if key_kind == "int" else [f"user-{k}" for k in keys],
            "v": list(range(n)),
        }
    )
    env = StreamExecutionEnvironment(
        parallelism=2, spark=spark, checkpoint_dir=str(tmp_path / "chk")
    )
    sink = FileSink(str(tmp_path / "out"))
    (
        env.from_arrow(table, batch_size=700)
        .map_batch(lambda b: b.set_column(1, "v", pc.multiply(b.column("v"), 2)), name="double")
        .key_by("k")
        .process(SumPerKey(), name="sum")
        .sink_to(sink)
    )
    result = env.execute("keyed-sums")
    written = ds.dataset(str(tmp_path / "out"), format="parquet").to_table()
    got = dict(
        zip(written.column("k").to_pylist(), written.column("total").to_pylist(), strict=True)
    )
    assert got == expected_sums(table)
    assert written.num_rows == 37  # each key exactly once
    assert result.records_out["source:collection -> double"] == n
    assert not list((tmp_path / "out").glob("_staging-*/*"))  # every staging file committed
