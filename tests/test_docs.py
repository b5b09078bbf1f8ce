"""The docs run: every python block of CONTRIBUTING.md, README.md and the example plugin's
README, their results checked against plain-Python references; the hook reference names
every hookspec."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from flintlock.core.hooks import specs as hookspecs

ROOT = Path(__file__).resolve().parent.parent
PLUGIN_README = "examples/flintlock-example-plugin/README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def python_blocks(document: str) -> list[str]:
    return BLOCK.findall((ROOT / document).read_text())


def run_each_block_alone(document: str) -> dict[str, Any]:
    """Run every block in a namespace of its own, as a reader who copies one would; the
    namespaces merged, later blocks' names over earlier ones'."""
    merged: dict[str, Any] = {}
    for number, block in enumerate(python_blocks(document), start=1):
        namespace: dict[str, Any] = {"__name__": f"docs_block_{number}"}
        exec(compile(block, f"{document} python block {number}", "exec"), namespace)
        merged.update(namespace)
    return merged


def run_blocks(document: str) -> dict[str, Any]:
    """Run a document's blocks in order, in one namespace, as a reader would."""
    namespace: dict[str, Any] = {"__name__": "docs_" + re.sub(r"\W", "_", document)}
    for number, block in enumerate(python_blocks(document), start=1):
        code = compile(block, f"{document} python block {number}", "exec")
        exec(code, namespace)
    return namespace


def hookspec_names() -> list[str]:
    return sorted(name for name in dir(hookspecs) if name.startswith("flintlock_"))


def test_contributing_python_blocks_run() -> None:
    assert len(python_blocks("CONTRIBUTING.md")) >= 6
    namespace = run_blocks("CONTRIBUTING.md")
    # the walk-throughs ran to their last line: their closing objects exist
    assert namespace["timer"].seconds.keys() == {"add_tax"}
    assert namespace["SNAPSHOTS"] == [1, 1]
    assert namespace["read"] == list(range(3, 0, -1))  # the countdown source, one per epoch
    assert namespace["TestJsonLinesSink"]().sink_target().label == "JsonLinesTarget"  # the kit ran


@pytest.mark.slow
def test_readme_python_blocks_run(spark: Any) -> None:
    blocks = python_blocks("README.md")
    assert blocks, "README.md has its 20-line example"
    assert len(blocks[0].strip().splitlines()) <= 25
    namespace = run_each_block_alone("README.md")
    # independently of the block's own assert: running totals per user, in plain Python
    totals: dict[str, int] = {}
    expected = []
    for payment in namespace["payments"]:
        totals[payment["user"]] = totals.get(payment["user"], 0) + payment["amount"]
        expected.append((payment["user"], totals[payment["user"]]))
    got = [(row["user"], row["total"]) for row in namespace["table"].to_pylist()]
    assert sorted(got) == sorted(expected)
    # the windows example: clicks per (user, 60 ms window), counted in plain Python
    windows: dict[tuple[str, int], int] = {}
    for click in namespace["clicks"]:
        start = click["ts"] - click["ts"] % 60
        windows[(click["user"], start)] = windows.get((click["user"], start), 0) + 1
    counted = {(r["user"], r["start"]): r["clicks"] for r in namespace["per_minute"].to_pylist()}
    assert counted == windows
    # the sliding-window averages: each sale in its two 20 ms windows, in plain Python
    sums: dict[tuple[str, int], list[int]] = {}
    for sale in namespace["sales"]:
        last = sale["ts"] - sale["ts"] % 10
        for start in (last, last - 10):
            sums.setdefault((sale["shop"], start), []).append(sale["amount"])
    expected_averages = sorted(sum(v) / len(v) for v in sums.values())
    assert sorted(r["average"] for r in namespace["averages"].to_pylist()) == expected_averages
    # the unbounded job: multiples of 3 below 1000, each once, over four epochs
    ids = sorted(namespace["multiples"].column("id").to_pylist())
    assert ids == [i for i in range(1000) if i % 3 == 0]
    # the Delta Lake job: the orders with id >= 2, once each, in a table partitioned by country
    expected_orders = [r for r in namespace["orders"].to_pylist() if r["id"] >= 2]
    assert namespace["big_orders"].select(["id", "country"]).to_pylist() == expected_orders
    delta_table = namespace["DeltaTable"](f"{namespace['folder']}/big_orders")
    assert delta_table.metadata().partition_columns == ["country"]
    # the run report: 600 ids in epochs of 200; the graph as the job chained it
    report = namespace["report"]
    assert [sum(e.records_in.values()) for e in report.epochs] == [2 * 200] * 3
    assert [(v.name, v.parallelism) for v in report.vertices] == [
        ("source:sequence", 2),
        ("double -> files", 2),
    ]
    assert [e.partitioner for e in report.edges] == ["hash('id')"]
    # the progress example: the words in, and those that are not "be", counted in plain Python
    words = ["to", "be", "or", "not", "to", "be"]
    figures = namespace["seen"][0]
    assert sum(figures["records_in"].values()) == len(words)
    assert sum(figures["records_out"].values()) == len([w for w in words if w != "be"])
    # keyed jobs from a DataFrame: per key, the rows and sums of its calls add up to
    # what plain Python counts, in at most one call per source subtask
    calls: dict[int, list[tuple[int, int]]] = {}
    for row in namespace["calls"].to_pylist():
        calls.setdefault(row["k"], []).append((row["rows"], row["sum"]))
    assert sorted(calls) == list(range(7))
    for key, parts in calls.items():
        ids = range(key, 150_000, 7)
        assert (sum(r for r, _ in parts), sum(s for _, s in parts)) == (len(ids), sum(ids))
        assert len(parts) <= 3
    # async I/O: each sku priced once, as plain Python prices it
    priced = sorted((r["sku"], r["cents"]) for r in namespace["prices"].to_pylist())
    assert priced == [(sku, sku * 3 + 99) for sku in range(400)]
    # the three-way join: orders paid and shipped (even ids, multiples of 3), in plain Python
    done = sorted(
        (r["order"], r["item"], r["paid"], r["carrier"]) for r in namespace["complete"].to_pylist()
    )
    assert done == [(i, f"sku-{i % 7}", 10 * i, "post") for i in range(60) if i % 6 == 0]
    # when something goes wrong: the key_by is named, with the column it missed
    assert (
        "KeyColumnError: key_by('word'): the rows reaching it have no column 'word'"
        in (namespace["key_by_error"])
    )


def test_example_plugin_readme_python_blocks_run() -> None:
    assert len(python_blocks(PLUGIN_README)) == 1
    namespace = run_blocks(PLUGIN_README)
    ids = [1, 1, 2]  # what the block feeds
    first_of_each_id = [{"id": id_} for n, id_ in enumerate(ids) if id_ not in ids[:n]]
    assert namespace["harness"].output_rows() == first_of_each_id
    assert namespace["harness"].task.records_processed == len(ids)


@pytest.mark.parametrize("hook", hookspec_names())
def test_every_hookspec_is_in_the_contributing_hook_reference(hook: str) -> None:
    reference = (ROOT / "CONTRIBUTING.md").read_text().split("## Hook reference", 1)[1]
    assert f"| `{hook}`" in reference
    assert (getattr(hookspecs, hook).__doc__ or "").strip(), f"{hook} has no docstring"


def cluster_section_commands() -> list[str]:
    """The ``$SPARK_HOME/...`` command lines of README's "Running on a cluster" (its
    shell blocks), without a trailing ``&``."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Running on a cluster\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```sh\n(.*?)^```", section, re.DOTALL | re.MULTILINE)
    lines = [line.removesuffix(" &") for block in blocks for line in block.splitlines()]
    return [line for line in lines if line.startswith("$SPARK_HOME/")]


def test_readme_runs_a_cluster_with_exactly_the_tests_commands() -> None:
    """README's commands for a standalone cluster, a job submitted to it and a Spark
    Connect server on it are the fixture's (tests/spark_cluster.py), ports and folders as
    README gives them, and README runs no Spark command the tests do not."""
    from spark_cluster import (
        connect_server_command,
        master_command,
        spark_bin,
        submit_command,
        worker_command,
    )

    home = str(Path(spark_bin("spark-class")).parent.parent)
    master = "spark://127.0.0.1:7077"
    commands = [
        master_command(7077, 8080),
        worker_command(master, 8081, "/tmp/worker-0"),
        worker_command(master, 8082, "/tmp/worker-1"),
        submit_command(master, "job.py"),
        connect_server_command(master, 15002, sys.executable),
    ]
    tested = [
        " ".join(c).replace(home, "$SPARK_HOME").replace(sys.executable, "$(command -v python)")
        for c in commands
    ]
    assert sorted(cluster_section_commands()) == sorted(tested)
    readme = (ROOT / "README.md").read_text()
    assert 'remote("sc://127.0.0.1:15002")' in readme  # the port the server listens on
