"""Async I/O on Spark against a real HTTP server the test starts (each answer takes
20 ms): an unbounded job whose lookups are still in flight at its checkpoints, stopped
with a savepoint and resumed at another parallelism; every row once in the output, the
rows in flight at a checkpoint called again (the server sees them twice)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import unbounded_jobs
from pyspark import cloudpickle
from unbounded_jobs import wait_for_epochs

from flintlock import AsyncDataStream, AsyncFunction, FileSink, StreamExecutionEnvironment

cloudpickle.register_pickle_by_value(unbounded_jobs)

pytestmark = pytest.mark.slow
PER_EPOCH = 300


class PriceServer(ThreadingHTTPServer):
    """Answers ``GET /price/<id>`` with ``{"id", "cents"}`` after 20 ms; counts requests."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), PriceHandler)
        self.requests: dict[int, int] = {}
        self.lock = threading.Lock()


class PriceHandler(BaseHTTPRequestHandler):
    server: PriceServer

    def do_GET(self) -> None:
        item = int(self.path.rsplit("/", 1)[1])
        with self.server.lock:
            self.server.requests[item] = self.server.requests.get(item, 0) + 1
        time.sleep(0.02)
        body = json.dumps({"id": item, "cents": item * 7 + 1}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def price_server() -> Iterator[PriceServer]:
    server = PriceServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


class PriceLookup(AsyncFunction):
    """One HTTP/1.0 GET per row over asyncio streams (no client library)."""

    def __init__(self, port: int) -> None:
        self.port = port

    async def async_invoke(self, row: dict[str, Any]) -> Any:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        writer.write(f"GET /price/{row['id']} HTTP/1.0\r\nHost: prices\r\n\r\n".encode())
        await writer.drain()
        answer = await reader.read()
        writer.close()
        price = json.loads(answer.split(b"\r\n\r\n", 1)[1])
        return {"id": row["id"], "cents": price["cents"]}


def build(spark: Any, base: Path, port: int, parallelism: int) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment(
        parallelism=parallelism, spark=spark, checkpoint_dir=str(base / "chk")
    )
    ids = env.from_sequence(rows_per_epoch=PER_EPOCH)
    priced = AsyncDataStream.unordered_wait(ids, PriceLookup(port), timeout=30_000, capacity=50)
    priced.sink_to(FileSink(str(base / "out")), name="prices")
    return env


def test_lookups_in_flight_at_checkpoints_and_a_savepoint_are_called_again_once_emitted(
    spark: Any, tmp_path: Path, price_server: PriceServer
) -> None:
    port = price_server.server_address[1]
    client = build(spark, tmp_path, port, parallelism=2).execute_async("prices")
    wait_for_epochs(client, 3)
    savepoint = client.stop()
    stopped = client.result()
    assert stopped.status == "STOPPED"

    resumed = build(spark, tmp_path, port, parallelism=1)
    client = resumed.execute_async("prices", restore_from=savepoint)
    wait_for_epochs(client, 2, after_run=stopped.run_id)
    client.stop(drain=True)
    drained = client.result()
    assert drained.status == "FINISHED"

    rows = pq.read_table(tmp_path / "out").to_pylist()
    count = PER_EPOCH * (stopped.epochs + drained.epochs)
    assert sorted(r["id"] for r in rows) == list(range(count))  # each row once
    assert all(r["cents"] == r["id"] * 7 + 1 for r in rows)  # the server's answer
    assert set(price_server.requests) >= set(range(count))
    called_again = [i for i, n in price_server.requests.items() if n > 1]
    assert called_again, "no lookup was in flight at a checkpoint: the test proves nothing"
