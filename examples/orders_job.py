"""flintlock's main example: revenue per customer and day, in event time, exactly once to Parquet.

Run it with ``flintlock run examples/orders_job.py [output-folder]`` (an embedded local
Spark starts by itself) or ``python examples/orders_job.py [output-folder]``. Orders
arrive out of order. Each batch gets the order's day and a ``customer_day`` key; a keyed
process function sums each (customer, day) in keyed state and, with an event-time timer
at the day's last second, emits the total once the watermark says that day is complete.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from flintlock import (
    FileSink,
    KeyedProcessFunction,
    StreamExecutionEnvironment,
    ValueStateDescriptor,
    WatermarkStrategy,
)

DAY = 86_400  # seconds; order timestamps are seconds since the epoch (UTC)
MAX_DISORDER = 300  # orders() shuffles timestamps by less than this
OUT_OF_ORDERNESS = 600  # the watermark trails the highest timestamp seen by this


def orders(n: int = 20_000) -> list[dict[str, Any]]:
    """Synthetic orders over three days, shuffled within a few minutes of each other."""
    rows = []
    for i in range(n):
        ts = i * (3 * DAY // n) + (i * 7919) % MAX_DISORDER
        rows.append(
            {"order": i, "customer": f"c{i * 31 % 50:02d}", "amount": (i % 97) + 0.5, "ts": ts}
        )
    return rows


def add_day(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Adds each order's ``day`` (ts // DAY) and its daily-total key ``customer_day``."""
    day = pc.divide(batch.column("ts"), DAY)  # integer division: timestamps are >= 0
    key = pc.binary_join_element_wise(batch.column("customer"), pc.cast(day, pa.string()), "/")
    return batch.append_column("day", day).append_column("customer_day", key)


class LateOrderError(ValueError):
    """An order arrived after its day's total was emitted: the total would be wrong."""


class DailyRevenue(KeyedProcessFunction):
    """Sums order amounts per (customer, day); emits the day's total when the day closes."""

    output_schema = pa.schema(
        [("customer", pa.string()), ("day", pa.int64()), ("revenue", pa.float64())]
    )

    def open(self) -> None:
        self.revenue = self.runtime_context.get_state(
            ValueStateDescriptor("revenue", pa.float64(), default=0.0)
        )

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        last_second = (value["day"] + 1) * DAY - 1
        if last_second <= ctx.timer_service().current_watermark():
            raise LateOrderError(
                f"order {value['order']} (ts {value['ts']}) came after day {value['day']} "
                f"closed; raise the watermark's out-of-orderness ({OUT_OF_ORDERNESS} s)"
            )
        self.revenue.update(self.revenue.value() + value["amount"])
        ctx.timer_service().register_event_time_timer(last_second)

    def on_timer(self, timestamp: int, ctx: Any, out: Any) -> None:
        customer, day = ctx.get_current_key().rsplit("/", 1)
        revenue = round(self.revenue.value(), 2)
        out.collect({"customer": customer, "day": int(day), "revenue": revenue})
        self.revenue.clear()


def main(output: str) -> pa.Table:
    """Build and run the job; returns what the sink committed to ``output``."""
    env = StreamExecutionEnvironment(parallelism=2)
    (
        env.from_collection(
            orders(),
            batch_size=2_000,
            watermark_strategy=WatermarkStrategy("ts", OUT_OF_ORDERNESS),
        )
        .filter(lambda order: order["amount"] > 1.0, name="valid")
        .map_batch(add_day, name="add_day")
        .key_by("customer_day")
        .process(DailyRevenue(), name="daily_revenue")
        .sink_to(FileSink(output))
    )
    result = env.execute("daily-revenue")
    table = (
        ds.dataset(output, format="parquet")
        .to_table()
        .sort_by([("day", "ascending"), ("customer", "ascending")])
    )
    for row in table.slice(0, 5).to_pylist():
        print(f"  day {row['day']}  {row['customer']}  {row['revenue']:>9.2f}")
    print(
        f"{table.num_rows} daily totals for {len(pc.unique(table.column('customer')))} "
        f"customers, written exactly once to {output} "
        f"(checkpoint {result.checkpoint_id}, {result.duration_seconds:.1f} s)"
    )
    return table


if __name__ == "__main__":
    folder = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="flintlock-orders-")
    main(str(Path(folder) / "daily_revenue"))
