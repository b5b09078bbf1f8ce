"""flintlock's main example: revenue per customer, in event time, exactly once to Parquet.

Run it with ``flintlock run examples/orders_job.py`` (an embedded local Spark starts by
itself) or ``python examples/orders_job.py``. Orders arrive out of order; a keyed process
function sums each customer's revenue in keyed state and, with an event-time timer,
emits the total once the watermark says the customer's day is complete.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from flintlock import (
    KeyedProcessFunction,
    StreamExecutionEnvironment,
    ValueStateDescriptor,
    WatermarkStrategy,
)
from flintlock.sinks.files import FileSink

DAY = 86_400


class DailyRevenue(KeyedProcessFunction):
    """Sums order amounts per customer and day; emits each day's total when it closes."""

    def open(self) -> None:
        self.revenue = self.runtime_context.get_state(
            ValueStateDescriptor("revenue", pa.float64(), default=0.0)
        )

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        self.revenue.update(self.revenue.value() + value["amount"])
        day_end = (value["ts"] // DAY + 1) * DAY
        ctx.timer_service().register_event_time_timer(day_end)

    def on_timer(self, timestamp: int, ctx: Any, out: Any) -> None:
        out.collect(
            {
                "customer": ctx.get_current_key(),
                "day": timestamp // DAY - 1,
                "revenue": round(self.revenue.value(), 2),
            }
        )
        self.revenue.clear()


def orders(n: int = 20_000) -> list[dict[str, Any]]:
    """Synthetic orders over three days, shuffled within a few minutes of each other."""
    rows = []
    for i in range(n):
        ts = i * (3 * DAY // n) + (i * 7919) % 300
        rows.append(
            {"order": i, "customer": f"c{i * 31 % 50:02d}", "amount": (i % 97) + 0.5, "ts": ts}
        )
    return rows


def main(output: str) -> pa.Table:
    """Build and run the job; returns what the sink committed."""
    env = StreamExecutionEnvironment(parallelism=2)
    (
        env.from_collection(
            orders(), batch_size=2_000, watermark_strategy=WatermarkStrategy("ts", 600)
        )
        .filter(lambda order: order["amount"] > 1.0, name="valid")
        .key_by("customer")
        .process(DailyRevenue(), name="daily_revenue")
        .sink_to(FileSink(output))
    )
    result = env.execute("daily-revenue")
    table = (
        ds.dataset(output, format="parquet")
        .to_table()
        .sort_by([("day", "ascending"), ("customer", "ascending")])
    )
    print(
        table.slice(0, 5).to_pandas().to_string(index=False) if _has_pandas() else table.slice(0, 5)
    )
    print(
        f"{table.num_rows} daily totals for {len(set(table.column('customer').to_pylist()))} "
        f"customers, written exactly once to {output} "
        f"(checkpoint {result.checkpoint_id}, {result.duration_seconds:.1f} s)"
    )
    return table


def _has_pandas() -> bool:
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="flintlock-orders-")
    try:
        main(str(Path(target) / "daily_revenue"))
    finally:
        if len(sys.argv) <= 1:
            shutil.rmtree(target, ignore_errors=True)
