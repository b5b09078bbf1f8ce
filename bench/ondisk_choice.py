"""Which embedded store for the on-disk backend: SQLite (standard library) or RocksDB
(``rocksdict``, if installed)? The access pattern of keyed state, measured raw.

Per record: for each of ``--ops`` updates to random keys among ``--keys``, read the key's
value and write a new one (W2's pattern); then a full scan (what a snapshot does). Values
are ``--value-bytes`` bytes, keys int64 (SQLite: an INTEGER primary key; RocksDB: 8 bytes).
A Python dict is the in-memory baseline.

    python bench/ondisk_choice.py [--keys 200000] [--ops 400000] [--value-bytes 100]
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable

import numpy as np


def dict_store(folder: str) -> tuple[Callable, Callable, Callable]:
    table: dict[int, bytes] = {}
    return table.get, table.__setitem__, lambda: sum(1 for _ in table.items())


def sqlite_store(folder: str) -> tuple[Callable, Callable, Callable]:
    connection = sqlite3.connect(f"{folder}/s.db", isolation_level=None)
    for pragma in ("journal_mode = OFF", "synchronous = OFF", "locking_mode = EXCLUSIVE",
                   "cache_size = -16384"):  # fmt: skip
        connection.execute(f"PRAGMA {pragma}")
    connection.execute("CREATE TABLE t (k PRIMARY KEY, kg INTEGER, v BLOB) WITHOUT ROWID")
    connection.execute("BEGIN")
    execute = connection.execute

    def get(key: int) -> bytes | None:
        row = execute("SELECT v FROM t WHERE k = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def put(key: int, value: bytes) -> None:
        execute("INSERT OR REPLACE INTO t (k, kg, v) VALUES (?, 0, ?)", (key, value))

    def scan() -> int:
        return sum(1 for _ in execute("SELECT kg, k, v FROM t"))

    return get, put, scan


def rocksdb_store(folder: str) -> tuple[Callable, Callable, Callable]:
    from rocksdict import Options, Rdict  # type: ignore[import-not-found]

    options = Options(raw_mode=True)
    db = Rdict(f"{folder}/r", options)

    def get(key: int) -> bytes | None:
        return db.get(key.to_bytes(8, "little", signed=True))

    def put(key: int, value: bytes) -> None:
        db[key.to_bytes(8, "little", signed=True)] = value

    def scan() -> int:
        return sum(1 for _ in db.items())

    return get, put, scan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--ops", type=int, default=400_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    args = parser.parse_args()
    keys = np.random.default_rng(1).integers(0, args.keys, args.ops).tolist()
    value = b"v" * args.value_bytes
    stores = {"dict (baseline)": dict_store, "sqlite3": sqlite_store}
    try:
        import rocksdict  # type: ignore[import-not-found]  # noqa: F401

        stores["rocksdict"] = rocksdb_store
    except ImportError:
        print("rocksdict is not installed: RocksDB not measured")
    print(
        f"{args.ops:,} read-modify-writes over {args.keys:,} keys, {args.value_bytes}-byte values"
    )
    print("| store | µs per read+write | vs dict | full scan s |")
    print("| --- | ---: | ---: | ---: |")
    base = None
    for name, make in stores.items():
        folder = tempfile.mkdtemp(prefix="flintlock-ondisk-")
        try:
            get, put, scan = make(folder)
            started = time.perf_counter()
            for key in keys:
                get(key)
                put(key, value)
            per_op = (time.perf_counter() - started) / args.ops * 1e6
            started = time.perf_counter()
            scan()
            scanned = time.perf_counter() - started
            base = base or per_op
            print(f"| {name} | {per_op:.2f} | {per_op / base:.1f}x | {scanned:.2f} |")
        finally:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
