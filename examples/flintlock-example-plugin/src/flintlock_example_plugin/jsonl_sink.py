"""A two-phase-commit sink: rows as JSON lines in a local folder, one staging file per
subtask attempt, renamed to its final name when the checkpoint commits.

The sink CONTRIBUTING.md walks through ("Write your own 2PC sink"), with the cleanup a
sink needs besides: ``abort_uncommitted`` removes the staging files of attempts that died
(their writer never aborted), and only this job's (its staging folder is named after the
job id). flintlock's conformance kit runs on it (tests/test_jsonl_sink.py)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import IO, Any, TypedDict

import pyarrow as pa

from flintlock import CommittableError, TwoPhaseCommitSink
from flintlock.plugin_api import CommitContext, SinkWriterContext


class StagedLines(TypedDict):
    """The committable: a staged file, its final name and the bytes written to it."""

    staging: str
    final: str
    bytes: int


@dataclass
class LinesTransaction:
    """One subtask attempt's staging file of one checkpoint."""

    file: IO[str]
    staging: str
    final: str


class JsonLinesSink(TwoPhaseCommitSink[LinesTransaction, StagedLines]):
    """Writes rows as JSON lines to ``folder``: ``part-<run>-<checkpoint>-<subtask>.jsonl``."""

    name = "jsonl"

    def __init__(self, folder: str) -> None:
        self.folder = os.path.abspath(folder)

    def staging_dir(self, job_id: str) -> str:
        """The job's own staging folder (a name starting with ``_``: readers skip it)."""
        return f"{self.folder}/_staging-{job_id or 'local'}"

    def begin_transaction(self, context: SinkWriterContext, checkpoint_id: int) -> LinesTransaction:
        task = context.task
        stem = f"{task.run_id}-{checkpoint_id}-{task.subtask_index}"
        staging = f"{self.staging_dir(task.job_id)}/{stem}-{task.attempt_id}.jsonl"
        os.makedirs(os.path.dirname(staging), exist_ok=True)
        return LinesTransaction(open(staging, "w"), staging, f"{self.folder}/part-{stem}.jsonl")

    def write(self, transaction: LinesTransaction, batch: pa.RecordBatch) -> None:
        transaction.file.writelines(json.dumps(row) + "\n" for row in batch.to_pylist())

    def finish(self, transaction: LinesTransaction) -> None:
        transaction.file.flush()

    def pre_commit(self, transaction: LinesTransaction) -> list[StagedLines]:
        transaction.file.close()
        size = os.path.getsize(transaction.staging)
        return [StagedLines(staging=transaction.staging, final=transaction.final, bytes=size)]

    def abort(self, transaction: LinesTransaction) -> None:
        transaction.file.close()
        if os.path.exists(transaction.staging):
            os.remove(transaction.staging)

    def commit(self, context: CommitContext, committables: list[StagedLines]) -> None:
        for file in committables:
            if os.path.exists(file["staging"]):
                if os.path.getsize(file["staging"]) != file["bytes"]:
                    raise CommittableError(f"{file['staging']} was truncated or changed")
                os.replace(file["staging"], file["final"])
            elif not os.path.exists(file["final"]):  # neither staged nor published: lost
                raise CommittableError(f"{file['staging']} is missing, never published")

    def abort_uncommitted(self, context: CommitContext, keep: list[StagedLines]) -> None:
        folder = self.staging_dir(context.job_id)
        if not os.path.isdir(folder):
            return
        kept = {file["staging"] for file in keep}
        for name in os.listdir(folder):
            if f"{folder}/{name}" not in kept:
                os.remove(f"{folder}/{name}")
        if not os.listdir(folder):
            os.rmdir(folder)


def committed_rows(folder: str) -> list[dict[str, Any]]:
    """What a reader of ``folder`` sees: the rows of every published part, in name order."""
    parts = sorted(name for name in os.listdir(folder) if name.startswith("part-"))
    rows: list[dict[str, Any]] = []
    for part in parts:
        with open(f"{folder}/{part}") as lines:
            rows.extend(json.loads(line) for line in lines)
    return rows
