"""Staged Arrow IPC files read back by a committer on the driver, checked against their
committable first (its size in bytes and rows): a sink that stages its rows in the job's
checkpoint storage (collect, Kafka) never publishes a missing or damaged file."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from flintlock import CheckpointError, CommittableError
from flintlock.plugin_api import CheckpointStorage, CommitContext


def read_staged(
    storage: CheckpointStorage, file: Mapping[str, Any], context: CommitContext
) -> pa.Table:
    """The staged file ``file["path"]`` of the context's checkpoint, with as many bytes
    and rows as ``file`` says; else a CommittableError naming it and what to do."""
    path = file["path"]
    where = f"checkpoint {context.checkpoint_id} of job '{context.job_name}'"
    anew = "run the job anew with new_run=True"
    if not storage.exists(path):
        raise CommittableError(
            f"the staged file {path} of {where} is missing: its rows are lost for good. "
            f"Starting again will not change that; run the job anew with "
            f"execute('{context.job_name}', new_run=True) or `flintlock run --new-run`"
        )
    size = storage.filesystem.get_file_info(path).size
    if size != file["bytes"]:
        raise CommittableError(
            f"the staged file {path} of {where} has {size} bytes, {file['bytes']} were "
            f"written (truncated or changed); {anew}"
        )
    try:
        table = storage.read_table(path)
    except CheckpointError as error:
        raise CommittableError(f"{error} ({where}); {anew}") from error
    if table.num_rows != file["rows"]:
        raise CommittableError(
            f"the staged file {path} of {where} holds {table.num_rows} rows, "
            f"{file['rows']} were written; {anew}"
        )
    return table
