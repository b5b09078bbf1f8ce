"""An async lookup job for tests/spark/test_async_io_on_spark.py: a price server the test
starts (HTTP, 20 ms per answer), the lookup that calls it, and the job; run as a script
it is a driver of its own, which the lookup can kill mid-epoch (SIGKILL, from a worker,
while calls are in flight) or whose Python worker it can kill once (a task killed).

Usage: ``python async_lookup_job.py BASE PORT END [--kill-driver-at ID] [--kill-task-at ID]``;
prints ``RESULT {"status": ..., "epochs": ...}`` if the driver lives to the end."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from flintlock import AsyncDataStream, AsyncFunction, FileSink, StreamExecutionEnvironment

PER_EPOCH = 300


class PriceServer(ThreadingHTTPServer):
    """Answers ``GET /price/<id>`` with ``{"id", "cents"}`` after 20 ms; counts requests."""

    daemon_threads = True
    # socketserver listens with a backlog of 5: the 50 calls in flight per subtask overflow
    # it while a loaded machine accepts slowly, and each dropped SYN is sent again after
    # 1, 2, 4, 8, 16 s, so a connect could take 31 s, past the lookup's 30 s timeout
    request_queue_size = 1024

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), PriceHandler)
        self.requests: dict[int, int] = {}
        self.lock = threading.Lock()

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class PriceHandler(BaseHTTPRequestHandler):
    server: PriceServer

    def do_GET(self) -> None:
        item = int(self.path.rsplit("/", 1)[1])
        with self.server.lock:
            self.server.requests[item] = self.server.requests.get(item, 0) + 1
        time.sleep(0.02)
        body = json.dumps({"id": item, "cents": price(item)}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def price(item: int) -> int:
    """The server's answer for ``item`` (the tests' reference)."""
    return item * 7 + 1


class PriceLookup(AsyncFunction):
    """One HTTP/1.0 GET per row over asyncio streams (no client library); ``faults``:
    ``{"driver": [id, pid], "task": id, "markers": folder}``, each fired once."""

    def __init__(self, port: int, faults: dict[str, Any] | None = None) -> None:
        self.port = port
        self.faults = faults or {}

    async def async_invoke(self, row: dict[str, Any]) -> Any:
        self._fault(row["id"])
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        writer.write(f"GET /price/{row['id']} HTTP/1.0\r\nHost: prices\r\n\r\n".encode())
        await writer.drain()
        answer = await reader.read()
        writer.close()
        found = json.loads(answer.split(b"\r\n\r\n", 1)[1])
        return {"id": row["id"], "cents": found["cents"]}

    def _fault(self, item: int) -> None:
        faults = self.faults
        if faults.get("task") == item and _first(faults["markers"], "task"):
            os._exit(3)  # the Python worker dies: Spark retries the task
        driver = faults.get("driver")
        if driver is not None and driver[0] == item and _first(faults["markers"], "driver"):
            time.sleep(0.05)  # let more calls start: the driver dies with calls in flight
            os.kill(driver[1], signal.SIGKILL)


def _first(folder: str, fault: str) -> bool:
    """True the first time ``fault`` fires (a marker file, across processes and runs)."""
    try:
        os.close(os.open(f"{folder}/{fault}", os.O_CREAT | os.O_EXCL))
        return True
    except FileExistsError:
        return False


def build(
    spark: Any,
    base: Path,
    port: int,
    parallelism: int,
    end: int | None = None,
    faults: dict[str, Any] | None = None,
) -> StreamExecutionEnvironment:
    """Sequence ids (``PER_EPOCH`` per epoch, up to ``end``) -> the lookup -> FileSink."""
    env = StreamExecutionEnvironment(
        parallelism=parallelism, spark=spark, checkpoint_dir=str(base / "chk")
    )
    ids = env.from_sequence(rows_per_epoch=PER_EPOCH, end=end)
    lookup = PriceLookup(port, faults)
    priced = AsyncDataStream.unordered_wait(ids, lookup, timeout=30_000, capacity=50)
    priced.sink_to(FileSink(str(base / "out")), name="prices")
    return env


if __name__ == "__main__":
    from job_scripts import print_result, start_session
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import it
    base, port, end = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    options = dict(zip(sys.argv[4::2], sys.argv[5::2], strict=True))
    faults: dict[str, Any] = {"markers": str(base)}
    if "--kill-driver-at" in options:
        faults["driver"] = [int(options["--kill-driver-at"]), os.getpid()]
    if "--kill-task-at" in options:
        faults["task"] = int(options["--kill-task-at"])
    spark = start_session("local[2,4]")  # a killed task is tried again
    result = build(spark, base, port, 2, end, faults).execute("prices")
    print_result({"status": result.status, "epochs": result.epochs})
