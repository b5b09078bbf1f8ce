"""The examples compute the right numbers: each checked against a plain pyarrow/numpy reference."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from flintlock import LifecycleError
from flintlock.operators.process import KeyedProcessOperator
from flintlock.testing import OneInputHarness

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load_example(name: str) -> ModuleType:
    """Import examples/<name>.py; its functions travel to Spark workers by value."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        from pyspark import cloudpickle

        cloudpickle.register_pickle_by_value(module)
    return sys.modules[name]


orders_job = load_example("orders_job")
w1 = load_example("w1")


# ---- examples/orders_job.py ----


def daily_revenue_reference(orders: list[dict[str, Any]]) -> list[tuple[str, int, float]]:
    """(customer, day, revenue) by a plain group-by: amount > 1.0, day = ts // 86400."""
    table = pa.Table.from_pylist([{**order, "day": order["ts"] // 86_400} for order in orders])
    valid = table.filter(pc.greater(table.column("amount"), 1.0))
    sums = valid.group_by(["customer", "day"]).aggregate([("amount", "sum")])
    return sorted(
        (customer, day, round(total, 2))
        for customer, day, total in zip(
            *(sums.column(c).to_pylist() for c in ("customer", "day", "amount_sum")), strict=True
        )
    )


def test_orders_job_writes_every_daily_total_of_a_plain_group_by(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "daily_revenue"
    table = orders_job.main(str(output))
    got = [
        (row["customer"], row["day"], row["revenue"])
        for row in table.select(["customer", "day", "revenue"]).to_pylist()
    ]
    expected = daily_revenue_reference(orders_job.orders())
    assert len(expected) == 150  # 50 customers x 3 days
    assert len(set(got)) == len(got) == len(expected)  # no (customer, day, revenue) twice
    assert len({(customer, day) for customer, day, _ in got}) == len(got)  # one total a day
    assert sorted(got) == expected
    out = capsys.readouterr().out
    assert f"150 daily totals for 50 customers, written exactly once to {output} " in out
    assert output.is_dir()  # the output stays where the example says


def test_orders_past_midnight_count_for_their_own_day() -> None:
    day = 86_400
    harness = OneInputHarness(
        KeyedProcessOperator(orders_job.DailyRevenue(), key_column="customer_day", name="daily")
    )
    orders = [
        {"order": 1, "customer": "c1", "amount": 10.0, "ts": day - 1},  # last second, day 0
        {"order": 2, "customer": "c1", "amount": 20.0, "ts": day},  # first second, day 1
        {"order": 3, "customer": "c1", "amount": 5.5, "ts": day - 100},  # out of order, day 0
        {"order": 4, "customer": "c2", "amount": 7.0, "ts": 2 * day + 5},
    ]
    harness.process_batch(orders_job.add_day(pa.RecordBatch.from_pylist(orders)))
    harness.process_watermark(day - 1)  # day 0 complete: its totals fire, no other
    assert harness.output_rows() == [{"customer": "c1", "day": 0, "revenue": 15.5}]
    harness.complete()
    assert harness.output_rows() == [
        {"customer": "c1", "day": 0, "revenue": 15.5},
        {"customer": "c1", "day": 1, "revenue": 20.0},
        {"customer": "c2", "day": 2, "revenue": 7.0},
    ]


def test_an_order_after_its_day_closed_fails_the_job_naming_the_order() -> None:
    day = 86_400
    harness = OneInputHarness(
        KeyedProcessOperator(orders_job.DailyRevenue(), key_column="customer_day", name="daily")
    )
    first = {"order": 1, "customer": "c1", "amount": 10.0, "ts": 10}
    harness.process_batch(orders_job.add_day(pa.RecordBatch.from_pylist([first])))
    harness.process_watermark(day)  # day 0 emitted
    late = {"order": 2, "customer": "c1", "amount": 3.0, "ts": day - 50}
    with pytest.raises(LifecycleError) as caught:
        harness.process_batch(orders_job.add_day(pa.RecordBatch.from_pylist([late])))
    assert isinstance(caught.value.__cause__, orders_job.LateOrderError)
    assert "order 2 (ts 86350) came after day 0 closed" in str(caught.value.__cause__)
    assert harness.output_rows() == [{"customer": "c1", "day": 0, "revenue": 10.0}]


def test_no_order_of_the_example_is_late_for_its_watermark() -> None:
    """Each source subtask reads a subsequence of orders() in order, so an order is never
    more than ``behind`` seconds older than one read before it; a watermark trails the
    highest timestamp by more than that, so it never closes an order's day before the
    order arrives."""
    orders = orders_job.orders()
    highest = np.maximum.accumulate(np.array([order["ts"] for order in orders]))
    behind = highest - np.array([order["ts"] for order in orders])
    assert behind.max() < orders_job.MAX_DISORDER < orders_job.OUT_OF_ORDERNESS


# ---- examples/w1.py ----


def w1_reference(n: int) -> tuple[int, float]:
    """W1 with numpy: key = i*2654435761 % 10000, value = (i % 1000)/10; keep even keys."""
    i = np.arange(n, dtype=np.int64)
    even = (i * 2654435761) % 10000 % 2 == 0
    return int(even.sum()), float(((i % 1000) / 10.0 * 2.0)[even].sum())


def test_w1_three_ways_match_numpy(spark: Any, tmp_path: Path) -> None:
    n = 30_000
    count, total = w1_reference(n)
    frame = w1.w1_input(spark, n)
    results = {
        "batch": w1.flintlock_w1(spark, frame, 2, False, str(tmp_path / "batch")),
        "record": w1.flintlock_w1(spark, frame, 2, True, str(tmp_path / "record")),
        "raw": w1.raw_map_in_arrow_w1(frame),
    }
    for way, (got_count, got_total) in results.items():
        assert got_count == count, way
        assert got_total == pytest.approx(total, rel=1e-12), way
