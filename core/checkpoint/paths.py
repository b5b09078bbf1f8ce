"""Paths inside checkpoint files: relative to the folder of the file that records them
when they lie under it, so that a savepoint folder can be moved or copied whole.

A recorded path is ``.`` (that folder), ``./<rest>`` (under it), or any other string: a
full path on the checkpoint's file system, as every checkpoint wrote before. ``./`` never
starts a ``pyarrow.fs`` path (local, HDFS, S3 and GCS paths alike), so the forms never mix.
"""

from __future__ import annotations

HERE = "."
RELATIVE = "./"


def relative_path(folder: str, path: str) -> str:
    """``path`` as a file in ``folder`` records it: ``./<rest>`` under it, else unchanged."""
    folder = folder.rstrip("/")
    if path == folder:
        return HERE
    if path.startswith(folder + "/"):
        return RELATIVE + path[len(folder) + 1 :]
    return path


def resolve_path(folder: str, recorded: str) -> str:
    """Where a path recorded by a file in ``folder`` really is (a full path as it is).

    A relative path that would leave ``folder`` (``..``, empty or ``.`` parts) is a
    ValueError: readers report it as a damaged file, naming the file."""
    if not isinstance(recorded, str):
        raise ValueError(f"a recorded path must be a string, not {recorded!r}")
    if recorded == HERE:
        return folder.rstrip("/")
    if not recorded.startswith(RELATIVE):
        return recorded
    rest = recorded[len(RELATIVE) :]
    if any(part in ("", ".", "..") for part in rest.split("/")):
        raise ValueError(f"the relative path {recorded!r} does not name a file under its folder")
    return f"{folder.rstrip('/')}/{rest}"


def parent_folder(path: str) -> str:
    """The folder a file lies in: what the paths it records are relative to."""
    return path.rstrip("/").rsplit("/", 1)[0]


def lies_under(path: str, folder: str) -> bool:
    """True if ``path`` is ``folder`` or lies anywhere under it."""
    folder = folder.rstrip("/")
    return path == folder or path.startswith(folder + "/")
