"""Snapshot and restore of keyed state on each backend, in MB/s of Arrow state files.

Fills one ValueState of a keyed backend (int64 keys, ``--value-bytes`` binary values)
until its snapshot is about ``--size-mb`` MB, then times ``snapshot`` (state -> Arrow IPC
files) and ``restore`` (files -> a new backend of the same kind) on one core, in
``--folder`` (default: the system's temporary folder, on local disk; ``/dev/shm`` takes
the disk out and shows the per-core cost). The baseline, timed in the same run and
folder, is pure pyarrow writing the same Arrow tables (already in memory) to IPC files:
the ceiling of the folder. The peak resident memory of the process (``ru_maxrss``,
taken before the baseline) is printed per backend: run one backend per process to read
it (``--backends sqlite``).

    python bench/state_snapshot.py [--size-mb 256] [--value-bytes 100]
        [--backends hashmap,sqlite] [--folder /dev/shm]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time

import pyarrow as pa
import pyarrow.fs as pafs

from flintlock import ValueStateDescriptor
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.hooks.manager import build_plugin_manager
from flintlock.core.hooks.registry import build_registry

CHUNK = 65536


def fill(keyed: object, entries: int, value_bytes: int) -> None:
    """``entries`` keys with distinct values, written with the batch-level API."""
    state = keyed.get_state(ValueStateDescriptor("blob", pa.binary()))  # type: ignore[attr-defined]
    pad = b"v" * (value_bytes - 8)
    for start in range(0, entries, CHUNK):
        keys = list(range(start, min(start + CHUNK, entries)))
        values = [k.to_bytes(8, "little") + pad for k in keys]
        state.update_values(pa.array(keys, pa.int64()), pa.array(values, pa.binary()))


def pyarrow_write_seconds(paths: list[str], target: str) -> float:
    """Seconds pure pyarrow takes to write the tables of ``paths`` (read first) again."""
    tables = [pa.ipc.open_file(pa.memory_map(path)).read_all() for path in paths]
    tables = [table.combine_chunks() for table in tables]  # in memory, off the clock
    started = time.perf_counter()
    for number, table in enumerate(tables):
        path = f"{target}-{number}.arrow"
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=int, default=256)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--backends", default="hashmap,sqlite")
    parser.add_argument("--folder", default=None, help="where the state files go")
    args = parser.parse_args()
    registry = build_registry(build_plugin_manager())
    per_entry = 8 + 4 + args.value_bytes + 4  # key, key group, value, value offset
    entries = args.size_mb * 1_000_000 // per_entry
    print(f"{entries:,} keys x {args.value_bytes}-byte values (~{args.size_mb} MB of Arrow state)")
    print(
        "| backend | state MB | fill s | snapshot s | snapshot MB/s | pyarrow write MB/s "
        "| x pyarrow | restore s | restore MB/s | peak RSS MB |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in args.backends.split(","):
        folder = tempfile.mkdtemp(prefix="flintlock-bench-", dir=args.folder)
        try:
            storage = CheckpointStorage(pafs.LocalFileSystem(), folder)
            backend = registry.get("state backend", name)()
            keyed = backend.create_keyed_backend(range(128), 128)
            started = time.perf_counter()
            fill(keyed, entries, args.value_bytes)
            filled = time.perf_counter() - started
            started = time.perf_counter()
            files = keyed.snapshot(storage, f"{folder}/chk-1")
            snapshot_s = time.perf_counter() - started
            size = sum(os.path.getsize(f.path) for f in files) / 1e6
            keyed.dispose()
            again = backend.create_keyed_backend(range(128), 128)
            started = time.perf_counter()
            again.restore(storage, files)
            restore_s = time.perf_counter() - started
            again.dispose()
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            baseline_s = pyarrow_write_seconds([f.path for f in files], f"{folder}/baseline")
            print(
                f"| {name} | {size:.0f} | {filled:.1f} | {snapshot_s:.2f} | "
                f"{size / snapshot_s:.0f} | {size / baseline_s:.0f} | "
                f"{snapshot_s / baseline_s:.2f} | {restore_s:.2f} | {size / restore_s:.0f} "
                f"| {rss:.0f} |"
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
