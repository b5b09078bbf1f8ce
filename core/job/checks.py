"""Checks of a job made on the driver before any Spark session starts.

``execute()`` calls ``check_before_spark`` first: every operator, function and plugin must
survive cloudpickle (the job ships them to the workers that way), and the checkpoint
directory must take a file. Then ``check_sink_outputs`` has every sink check its output
from its configuration and the stream's schema (``TwoPhaseCommitSink.check_output``:
a table that does not fit, a server out of reach). Each failure names the operator (and,
where it can be found, the attribute holding what cannot be pickled), the sink or the
path, instead of a Py4J stack trace minutes later.
"""

from __future__ import annotations

import io
import itertools
import types
import uuid
from collections.abc import Iterator
from typing import Any

import cloudpickle
import pyarrow as pa

from flintlock.core.api.sink import OutputCheckContext
from flintlock.core.checkpoint.job_folder import RESULT
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.errors import (
    CheckpointDirectoryError,
    FlintlockError,
    NotPicklableError,
    SinkOutputError,
)
from flintlock.core.plan.graph import Transformation
from flintlock.core.storage.options import NO_OPTIONS, StorageOptions
from flintlock.core.storage.whole_objects import delete, get, is_object_store, put

MAX_DEPTH = 8
"""How deep the search for the attribute that cannot be pickled goes."""

MAX_ITEMS = 1000
"""How many items of one list or dict the search tries (else it names the container)."""


def check_before_spark(
    transformations: list[Transformation],
    checkpoint_dir: str | None,
    plugins: list[object],
    options: StorageOptions = NO_OPTIONS,
) -> None:
    """Every check that needs no Spark: picklable job parts, a writable checkpoint directory."""
    for transformation in transformations:
        check_picklable_transformation(transformation)
    for index, plugin in enumerate(plugins):
        check_picklable(plugin, f"plugin {index} ({type(plugin).__name__})", "plugin")
    if checkpoint_dir is not None:
        check_checkpoint_directory(checkpoint_dir, options)


# ---- pickling ----


class _Discard(io.RawIOBase):
    """A file that forgets what is written: pickling costs no memory for the bytes."""

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return memoryview(data).nbytes


def _dumps(value: Any) -> None:
    """Pickle ``value`` as the job ships it, discarding the bytes (Arrow buffers out of band)."""
    cloudpickle.CloudPickler(_Discard(), protocol=5, buffer_callback=lambda _: True).dump(value)


def check_picklable_transformation(transformation: Transformation) -> None:
    """The transformation (its operator factory, function, source, sink) pickles."""
    try:
        _dumps(transformation)
    except Exception as error:
        raise _not_picklable(transformation, error) from error


def check_picklable(value: Any, what: str, root: str) -> None:
    """``value`` pickles; else an error naming ``what`` and the attribute at fault."""
    try:
        _dumps(value)
    except Exception as error:
        found = find_unpicklable(value, root)
        raise NotPicklableError(_message(what, found, error)) from error


def _not_picklable(transformation: Transformation, error: Exception) -> NotPicklableError:
    """Name the operator and, by building it here and walking its attributes, the culprit."""
    what = f"operator '{transformation.name}'"
    found = None
    try:
        operator = transformation.make_operator()
    except Exception:
        operator = None
    if operator is not None:
        what = f"operator '{transformation.name}' ({type(operator).__name__})"
        found = find_unpicklable(operator, "operator")
    if found is None:  # what the operator factory closes over
        found = find_unpicklable(transformation.make_operator, "factory")
    if found is None and transformation.sink is not None:
        found = find_unpicklable(transformation.sink, "sink")
    return NotPicklableError(_message(what, found, error))


def _message(what: str, found: tuple[str, Any, Exception] | None, error: Exception) -> str:
    if found is None:
        return (
            f"{what} cannot be pickled to ship it to the Spark workers: "
            f"{type(error).__name__}: {error}"
        )
    path, value, cause = found
    return (
        f"{what} cannot be pickled to ship it to the Spark workers: {path} holds a "
        f"{type(value).__module__}.{type(value).__qualname__} ({type(cause).__name__}: "
        f"{cause}); create it on the worker (in open()) instead of holding it from the driver"
    )


def find_unpicklable(
    value: Any, path: str, depth: int = 0, seen: set[int] | None = None
) -> tuple[str, Any, Exception] | None:
    """The innermost (path, value, error) that cannot be pickled under ``value``, or None
    if ``value`` pickles. Walks attributes, items, closures and the globals a function uses."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return None
    seen.add(id(value))
    try:
        _dumps(value)
        return None
    except Exception as error:
        own_error = error
    if depth < MAX_DEPTH:
        for child_path, child in _children(value, path):
            found = find_unpicklable(child, child_path, depth + 1, seen)
            if found is not None:
                return found
    return path, value, own_error


def _children(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """What ``value`` holds, each with the path a reader would write to reach it."""
    if isinstance(value, types.MethodType):
        yield f"{path}.__self__", value.__self__
        yield path, value.__func__
        return
    if isinstance(value, types.FunctionType):
        code = value.__code__
        for name, cell in zip(code.co_freevars, value.__closure__ or (), strict=False):
            try:
                yield f"{path} (closure variable '{name}')", cell.cell_contents
            except ValueError:  # an empty cell
                continue
        for name in code.co_names:
            if name in value.__globals__:
                held = value.__globals__[name]
                if not isinstance(held, types.ModuleType):
                    yield f"{path} (global '{name}')", held
        return
    if isinstance(value, dict):
        for key, item in itertools.islice(value.items(), MAX_ITEMS):
            yield f"{path}[{key!r}]", item
        return
    if isinstance(value, list | tuple | set | frozenset):
        for index, item in enumerate(itertools.islice(value, MAX_ITEMS)):
            yield f"{path}[{index}]", item
        return
    if isinstance(value, pa.Array | pa.RecordBatch | pa.Table | pa.Schema):
        return
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict):
        for name, item in attributes.items():
            yield f"{path}.{name}", item
    for name in getattr(type(value), "__slots__", ()):
        if hasattr(value, name):
            yield f"{path}.{name}", getattr(value, name)


# ---- checkpoint directory ----


def check_checkpoint_directory(checkpoint_dir: str, options: StorageOptions = NO_OPTIONS) -> None:
    """Create the folder and write, read back and delete a small file in it."""
    if not isinstance(checkpoint_dir, str) or not checkpoint_dir:
        raise CheckpointDirectoryError(
            f"checkpoint_dir must be an absolute path or a URI, not {checkpoint_dir!r}"
        )
    try:  # exactly as CheckpointStorage.from_uri reads it
        filesystem, base = options.filesystem(checkpoint_dir)
    except (pa.ArrowException, ValueError, OSError) as error:
        raise CheckpointDirectoryError(
            f"checkpoint directory '{checkpoint_dir}' is neither an absolute path nor a URI "
            f"of a file system pyarrow knows ({error})"
        ) from error
    probe = f"{base.rstrip('/')}/.flintlock-probe-{uuid.uuid4().hex}"
    data = b"flintlock checks this folder takes files before the job starts\n"
    try:
        if not is_object_store(filesystem):  # a folder there is a key prefix, made by the write
            filesystem.create_dir(base, recursive=True)
        put(filesystem, probe, data)  # one request each on an object store
        if get(filesystem, probe) != data:
            raise OSError("the file read back differs from what was written")
        delete(filesystem, probe)
    except (OSError, pa.ArrowException) as error:
        raise CheckpointDirectoryError(
            f"checkpoint directory '{checkpoint_dir}' is not writable: {error}; give a "
            f"checkpoint_dir the driver and every executor can write"
        ) from error


# ---- sinks' outputs ----


def check_sink_outputs(transformations: list[Transformation], job_name: str) -> None:
    """Have every 2PC sink check its output (``check_output``), in graph order; an error
    that is no flintlock error becomes a SinkOutputError naming the sink and the job."""
    for transformation in transformations:
        sink = transformation.sink
        if sink is None:
            continue
        try:
            sink.check_output(OutputCheckContext(job_name, transformation.name))
        except FlintlockError:
            raise
        except Exception as error:
            raise SinkOutputError(
                f"sink '{transformation.name}' ({type(sink).__name__}) of job '{job_name}' "
                f"failed checking its output: {type(error).__name__}: {error}"
            ) from error


def finished_before(
    checkpoint_dir: str | None, job_name: str, options: StorageOptions = NO_OPTIONS
) -> bool:
    """True if the job's result store says a run FINISHED: a start without ``new_run``
    only returns that result, and checks no output. Read without the job's lease; the
    job master reads it again (and checks its job id) under the lease."""
    if checkpoint_dir is None:  # a temporary folder: every run is new
        return False
    storage = CheckpointStorage.from_uri(checkpoint_dir, options)
    path = f"{storage.job_dir(job_name)}/{RESULT}"
    try:
        if not storage.exists(path):
            return False
        document = storage.read_json(path)
    except (OSError, FlintlockError, pa.ArrowException):  # damaged: the master says how
        return False
    return isinstance(document, dict) and document.get("status") == "FINISHED"
