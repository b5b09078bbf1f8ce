"""Keyed state through a checkpoint: snapshot, restore (same and other parallelism), and
the offline reader, each against pyarrow doing the same file I/O in the same run.

    python bench/checkpoint_restore.py [--keys 1000000] [--rounds 3]

No Spark. The state is one int64 ValueState per key in the ``hashmap`` backend, over 4
old subtasks; the checkpoint is a real folder (manifests, metadata via the coordinator).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

from flintlock.core.checkpoint.coordinator import CheckpointCoordinator
from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.checkpoint.reader import load_checkpoint
from flintlock.core.checkpoint.restore import subtask_restore
from flintlock.core.checkpoint.snapshots import OperatorSnapshot, TaskSnapshot
from flintlock.core.checkpoint.state_reader import read_state, verify_state_files
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.exchange.key_groups import key_group_range
from flintlock.core.exchange.murmur import key_groups_of
from flintlock.core.state.descriptors import ValueStateDescriptor
from flintlock.plugins.hashmap_backend import HashMapKeyedStateBackend

OLD, NEW, MAX = 4, 3, 128
DESCRIPTOR = ValueStateDescriptor("total", pa.int64(), default=0)


def best(rounds: int, action: Callable[[], object]) -> float:
    """The fastest of ``rounds`` runs, in seconds."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


def filled_backends(keys: np.ndarray) -> list[HashMapKeyedStateBackend]:
    """One hashmap backend per old subtask, holding ``key * 2`` for the keys it owns."""
    groups = key_groups_of(pa.array(keys), MAX)
    backends = []
    for subtask in range(OLD):
        owned = key_group_range(subtask, OLD, MAX)
        backend = HashMapKeyedStateBackend(owned, MAX)
        state = backend.get_state(DESCRIPTOR)
        mine = keys[(groups >= owned.start) & (groups < owned.stop)].tolist()
        for key in mine:
            backend.set_current_key(key)
            state.update(key * 2)
        backends.append(backend)
    return backends


def checkpoint(storage: CheckpointStorage, backends: list[HashMapKeyedStateBackend]) -> Path:
    """Snapshot every backend as subtask i of 'sums' and complete checkpoint 1 of 'bench'."""
    folder = JobFolder(storage, "bench")
    folder.open()
    acks = []
    for subtask, backend in enumerate(backends):
        directory = f"{folder.run_dir('run')}/chk-1/sums/{subtask}-{subtask}"
        files = backend.snapshot(storage, f"{directory}/sums")
        owned = key_group_range(subtask, OLD, MAX)
        snapshot = TaskSnapshot(
            1, "checkpoint", True, "sums", subtask, OLD, MAX, directory,
            {"sums": OperatorSnapshot("sums", keyed=files)}, key_groups=[owned.start, owned.stop],
        )  # fmt: skip
        storage.write_json(f"{directory}/_task.json", snapshot.to_json())
        acks.append(
            {"checkpoint_id": 1, "task_name": "sums", "subtask_index": subtask,
             "committables": {}, "manifest_path": f"{directory}/_task.json"}
        )  # fmt: skip
    CheckpointCoordinator(folder).complete(1, "run", True, acks, {("sums", i) for i in range(OLD)})
    return Path(folder.checkpoints) / "chk-1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    base = tempfile.mkdtemp(prefix="flintlock-bench-")
    try:
        storage = CheckpointStorage.from_uri(base)
        keys = np.random.default_rng(7).permutation(args.keys * 10)[: args.keys].astype(np.int64)
        backends = filled_backends(keys)
        chk = checkpoint(storage, backends)
        loaded = load_checkpoint(str(chk))
        files = [f for s in loaded.subtasks for f in s.operators["sums"].keyed]
        size = sum(Path(f.path).stat().st_size for f in files) / 1e6
        tables = [pa.ipc.open_file(f.path).read_all() for f in files]

        def arrow_write() -> None:
            for i, table in enumerate(tables):
                path = f"{base}/copy-{i}.arrow"
                with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as out:
                    out.write_table(table)

        def arrow_read() -> None:
            pa.concat_tables([pa.ipc.open_file(f.path).read_all() for f in files])

        def snapshot() -> None:
            for i, backend in enumerate(backends):
                backend.snapshot(storage, f"{base}/again/{i}")

        def restore(parallelism: int) -> Callable[[], None]:
            def run() -> None:
                for subtask in range(parallelism):
                    plan = subtask_restore(
                        1, loaded.subtasks, {"sums": "sums"}, subtask, parallelism, MAX
                    )
                    backend = HashMapKeyedStateBackend(
                        key_group_range(subtask, parallelism, MAX), MAX
                    )
                    backend.restore(
                        storage, [f for s in plan.snapshots for f in s.operators["sums"].keyed]
                    )

            return run

        def read() -> None:
            read_state(str(chk), "sums", "total")

        def check() -> None:
            verify_state_files(load_checkpoint(str(chk)))

        baseline_write = best(args.rounds, arrow_write)
        baseline_read = best(args.rounds, arrow_read)
        rows = [
            ("pyarrow: write the same tables (baseline)", baseline_write, baseline_write),
            ("hashmap snapshot, 4 subtasks", best(args.rounds, snapshot), baseline_write),
            ("pyarrow: read the same files (baseline)", baseline_read, baseline_read),
            ("hashmap restore, 4 -> 4", best(args.rounds, restore(OLD)), baseline_read),
            ("hashmap restore, 4 -> 3 (rescale)", best(args.rounds, restore(NEW)), baseline_read),
            ("driver check before a restore", best(args.rounds, check), baseline_read),
            ("read_state (offline reader)", best(args.rounds, read), baseline_read),
        ]  # fmt: skip
        print(f"{args.keys:,} keys, {size:.1f} MB of state files, best of {args.rounds}")
        print(f"| {'case':<45} | {'s':>7} | {'MB/s':>8} | {'x baseline':>10} |")
        print(f"| {'-' * 45} | {'-' * 7}: | {'-' * 8}: | {'-' * 10}: |")
        for name, seconds, baseline in rows:
            rate, ratio = size / seconds, seconds / baseline
            print(f"| {name:<45} | {seconds:7.3f} | {rate:8.0f} | {ratio:10.2f} |")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
