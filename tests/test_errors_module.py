"""One errors module: core/errors.py defines every error class flintlock has, and
``flintlock.errors`` exports each of them; they survive pickling, as they may cross from
a Spark worker to the driver."""

from __future__ import annotations

import ast
import builtins
import inspect
import pickle
import re
import threading
from pathlib import Path

import pytest

import flintlock.core.errors as core_errors
import flintlock.errors
from flintlock.core.failure_report import FailureReport

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_FOLDERS = ("core", "flintlock", "operators", "plugins", "sinks")
ERRORS_MODULE = Path("core/errors.py")

INTERNAL: dict[str, str] = {}
"""``path:ClassName`` of an exception class allowed outside core/errors.py, and why (an
internal signal that never reaches a user). None today."""

BUILTIN_EXCEPTIONS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}


def _modules() -> list[tuple[Path, ast.Module]]:
    paths = sorted(p for folder in PACKAGE_FOLDERS for p in (ROOT / folder).rglob("*.py"))
    return [(p.relative_to(ROOT), ast.parse(p.read_text(), str(p))) for p in paths]


def _base_names(node: ast.ClassDef) -> set[str]:
    """The last part of each base's name (``errors.FlintlockError`` -> ``FlintlockError``)."""
    return {ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases}


def exception_classes() -> list[tuple[Path, str]]:
    """Every class under the package folders deriving (by name, transitively) from a
    builtin exception or from another such class, with the module defining it."""
    classes = [
        (path, node)
        for path, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    ]
    known = set(BUILTIN_EXCEPTIONS)
    found: dict[tuple[Path, str], None] = {}
    grew = True
    while grew:
        grew = False
        for path, node in classes:
            if (path, node.name) not in found and _base_names(node) & known:
                found[(path, node.name)] = None
                known.add(node.name)
                grew = True
    return list(found)


def test_only_core_errors_defines_exception_classes() -> None:
    outside = [
        f"{path}:{name}"
        for path, name in exception_classes()
        if path != ERRORS_MODULE and f"{path}:{name}" not in INTERNAL
    ]
    assert outside == [], (
        "define error classes in core/errors.py (and export them from flintlock/errors.py): "
        + ", ".join(outside)
    )


def test_the_scan_sees_the_errors_of_core_errors() -> None:
    """The name-based scan above finds what core/errors.py defines, so it can find a
    class defined elsewhere."""
    assert {name for path, name in exception_classes() if path == ERRORS_MODULE} == set(
        _error_classes()
    )


def _error_classes() -> dict[str, type[BaseException]]:
    return {
        name: value
        for name, value in vars(core_errors).items()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == core_errors.__name__
    }


def test_flintlock_errors_exports_every_error_class() -> None:
    classes = _error_classes()
    assert sorted(flintlock.errors.__all__) == sorted(classes)
    for name, cls in classes.items():
        assert getattr(flintlock.errors, name) is cls
        assert issubclass(cls, core_errors.FlintlockError) or cls is core_errors.TaskCanceled


def test_the_module_docstring_places_every_error_class() -> None:
    doc = core_errors.__doc__ or ""
    missing = [name for name in _error_classes() if not re.search(rf"\b{name}\b", doc)]
    assert missing == []


def test_contributing_says_when_a_user_sees_each_error() -> None:
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    section = contributing.split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    missing = [name for name in flintlock.errors.__all__ if f"`{name}`" not in section]
    assert missing == [], f'CONTRIBUTING.md\'s "Errors" section does not name {missing}'


def _report() -> FailureReport:
    return FailureReport(
        job_name="orders",
        run_id="r1",
        checkpoint_id=3,
        task_name="map",
        task_type="one-input",
        subtask_index=1,
        parallelism=2,
        attempt_number=0,
        attempt_id=7,
        phase="run",
        cause_type="KeyError",
        cause_message="'customer_id'",
        operator="enrich",
        operator_method="process_element",
        record="{'id': 1}",
    )


@pytest.mark.parametrize("name", sorted(flintlock.errors.__all__))
def test_every_error_pickles_as_itself(name: str) -> None:
    cls = getattr(flintlock.errors, name)
    if cls is core_errors.LifecycleError:
        error = core_errors.LifecycleError.from_report(_report())
    else:
        error = cls("boom in 'orders'")
    error.by_signal = True  # an attribute set after raising (JobCanceled) travels too
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls
    assert str(copy) == str(error)
    if cls is core_errors.LifecycleError:
        assert copy.report == error.report
        assert (copy.operator, copy.phase, copy.subtask_index) == ("enrich", "run", 1)
    else:
        assert copy.by_signal is True


def test_a_spark_job_error_pickles_without_its_spark_error() -> None:
    """Spark's Py4J error holds the driver's link to its JVM, which cannot be pickled (a
    lock here): a copy of the flintlock error keeps its message and leaves it behind."""
    error = core_errors.WorkerCrashedError("worker of 'map' subtask 1 died", threading.Lock())
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == "worker of 'map' subtask 1 died" and copy.spark_error is None
