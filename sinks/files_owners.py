"""Who writes in a FileSink's output folder: ``<path>/_flintlock/<job id>.json`` records
each job (and its runs) that wrote there, so that an error names the owner of the data
or of pending files it found, and a job's staging folder (``_staging-<job id>/``) is
known to be its own. Data files are those a reader of the folder sees."""

from __future__ import annotations

import json
from typing import Any

import pyarrow.fs as pafs

from flintlock import SinkOutputError
from flintlock.plugin_api import CommitContext, list_folder
from flintlock.sinks.files_s3 import S3Files, error_code, s3_of

REGISTRY = "_flintlock"
"""``<path>/_flintlock/<job id>.json``: which job (and runs) wrote the files in ``path``."""


def data_files(filesystem: pafs.FileSystem, base: str) -> list[str]:
    """Files a reader of ``base`` sees (none under a ``_`` or ``.`` name), sorted."""
    return sorted(
        info.path
        for info in list_folder(filesystem, base, recursive=True)
        if info.type == pafs.FileType.File
        and not any(part[:1] in "_." for part in info.path[len(base) + 1 :].split("/"))
    )


def register(filesystem: pafs.FileSystem, base: str, context: CommitContext) -> None:
    """Record that this job's run writes here (names the owner in later errors)."""
    path = registry_file(base, context.job_id)
    document = _owner(context) | {"run_ids": [context.run_id]}
    s3 = S3Files.of(filesystem, base)
    if s3 is not None:  # a read and a write: no lookup first, no multipart upload
        bucket, key = s3.locate(path)
        there = _read_on_s3(s3, path)
        if there is None or context.run_id not in there.get("run_ids", []):
            runs = there.get("run_ids", []) if there is not None else []
            document["run_ids"] = sorted(set(runs) | {context.run_id})
            body = json.dumps(document, sort_keys=True).encode()
            s3.call("write", s3.client.put_object, Bucket=bucket, Key=key, Body=body)
        return
    if exists(filesystem, path):
        runs = _read_json(filesystem, path).get("run_ids", [])
        if context.run_id in runs:
            return
        document["run_ids"] = sorted(set(runs) | {context.run_id})
    _write_json(filesystem, path, document)


def _read_on_s3(s3: S3Files, path: str) -> dict[str, Any] | None:
    """The registry document at ``path`` on S3 (one GetObject), None if there is none."""
    bucket, key = s3.locate(path)
    try:
        data = s3.client.get_object(Bucket=bucket, Key=key)["Body"].read()
    except Exception as error:
        if error_code(error) in ("NoSuchKey", "404"):
            return None
        message = f"the file sink cannot read its bookkeeping file {path}: {error}"
        raise SinkOutputError(message) from error
    try:
        document = json.loads(data)
    except ValueError as error:
        message = f"the file sink's bookkeeping file {path} is damaged: {error}"
        raise SinkOutputError(message) from error
    if not isinstance(document, dict):
        raise SinkOutputError(f"the file sink's bookkeeping file {path} is damaged")
    return document


def registry_file(base: str, job_id: str) -> str:
    return f"{base}/{REGISTRY}/{job_id or 'local'}.json"


def writers_of(filesystem: pafs.FileSystem, base: str, data: list[str]) -> str:
    """ ", written by job ..." for the jobs whose runs wrote ``data`` ("" if none known)."""
    owners = []
    for info in list_folder(filesystem, f"{base}/{REGISTRY}"):
        document = _read_json(filesystem, info.path)
        if any(f"/part-{run}-" in path for run in document.get("run_ids", []) for path in data):
            owners.append(_describe(document))
    return f", written by {' and '.join(sorted(owners))}" if owners else ""


def other_pending_jobs(filesystem: pafs.FileSystem, base: str, job_id: str) -> list[str]:
    """Other jobs whose staging folder in ``base`` holds files (a commit may follow)."""
    pending = []
    for info in list_folder(filesystem, base):
        if info.type != pafs.FileType.Directory or not info.base_name.startswith("_staging-"):
            continue
        other = info.base_name.removeprefix("_staging-")
        if other == (job_id or "local") or not list_folder(filesystem, info.path):
            continue
        registry = registry_file(base, other)
        pending.append(
            _describe(_read_json(filesystem, registry))
            if exists(filesystem, registry)
            else f"an unknown job (staging folder {info.path})"
        )
    return sorted(pending)


def exists(filesystem: pafs.FileSystem, path: str) -> bool:
    return bool(filesystem.get_file_info(path).type == pafs.FileType.File)


def _owner(context: CommitContext) -> dict[str, Any]:
    return {
        "job_name": context.job_name,
        "job_id": context.job_id,
        "checkpoint_dir": context.storage.base_path,
    }


def _describe(owner: dict[str, Any]) -> str:
    return f"job {owner.get('job_name')!r} (checkpoint dir {owner.get('checkpoint_dir')})"


def _write_json(filesystem: pafs.FileSystem, path: str, document: dict[str, Any]) -> None:
    """Readers see the old document or the new one whole: written beside it, then renamed
    over it; on S3, where an object appears whole and a rename is a copy, written in place."""
    data = json.dumps(document, sort_keys=True).encode()
    if s3_of(filesystem) is not None:
        with filesystem.open_output_stream(path) as sink:
            sink.write(data)
        return
    filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
    temporary = f"{path}.inprogress"
    with filesystem.open_output_stream(temporary) as sink:
        sink.write(data)
    filesystem.move(temporary, path)


def _read_json(filesystem: pafs.FileSystem, path: str) -> dict[str, Any]:
    try:
        with filesystem.open_input_stream(path) as source:
            document = json.loads(source.read())
    except (OSError, ValueError) as error:
        raise SinkOutputError(
            f"the file sink's bookkeeping file {path} is damaged: {error}"
        ) from error
    if not isinstance(document, dict):
        raise SinkOutputError(f"the file sink's bookkeeping file {path} is damaged")
    return document
