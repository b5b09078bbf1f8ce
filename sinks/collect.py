"""The collect sink: a 2PC sink whose commit hands the rows to the driver's execute().

Writers stage Arrow IPC files in checkpoint storage; committables are their paths; the
commit (on the driver, once the checkpoint completed) reads them into one table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from flintlock.core.checkpoint_storage import CheckpointStorage, safe_name
from flintlock.core.plugin_manager import hookimpl
from flintlock.core.sink_api import CommitContext, SinkWriterContext, TwoPhaseCommitSink


@dataclass
class _Staging:
    storage: CheckpointStorage
    path: str
    stream: Any = None
    writer: Any = None


class CollectSink(TwoPhaseCommitSink):
    """Collects a stream into a pyarrow.Table, returned by ``execute()`` (exactly once)."""

    name = "collect"

    def __init__(self, name: str = "collect") -> None:
        self.name = name
        self.result: pa.Table | None = None

    def begin_transaction(self, context: SinkWriterContext, checkpoint_id: int) -> _Staging:
        task = context.task
        path = (
            f"{context.storage.base_path}/{safe_name(task.job_name)}/{task.run_id}/collect/"
            f"{safe_name(self.name)}/chk-{checkpoint_id}/{task.subtask_index}-{task.attempt_id}.arrow"
        )
        return _Staging(context.storage, path)

    def write(self, transaction: _Staging, batch: pa.RecordBatch) -> None:
        if transaction.writer is None:
            transaction.storage.filesystem.create_dir(
                transaction.path.rsplit("/", 1)[0], recursive=True
            )
            transaction.stream = transaction.storage.filesystem.open_output_stream(transaction.path)
            transaction.writer = pa.ipc.new_file(transaction.stream, batch.schema)
        transaction.writer.write_batch(batch)

    def pre_commit(self, transaction: _Staging) -> list[Any]:
        if transaction.writer is None:
            return []
        transaction.writer.close()
        transaction.stream.close()
        return [transaction.path]

    def abort(self, transaction: _Staging) -> None:
        if transaction.writer is not None:
            transaction.writer.close()
            transaction.stream.close()
            transaction.storage.filesystem.delete_file(transaction.path)

    def commit(self, context: CommitContext, committables: list[Any]) -> None:
        tables = [context.storage.read_table(path) for path in committables]
        self.result = pa.concat_tables(tables) if tables else pa.table({})


@hookimpl
def flintlock_register_sinks(register: Callable[[str, Any], None]) -> None:
    register("collect", CollectSink)
