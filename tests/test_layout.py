"""The layout of core/ (CONTRIBUTING.md, "Layout"), checked by parsing every module's imports.

core/ is grouped in layers; a module imports at run time only from its own layer or the
layers below it (imports under ``if TYPE_CHECKING:`` are annotations, loaded by no one,
and left out). core/ imports none of plugins/, operators/, sinks/, not even for types.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "core"
MAX_LINES = 400
MAX_MODULES = 15

LAYERS: dict[str, int] = {
    # 0: the vocabulary every room shares (modules at core/'s top)
    "": 0,
    # 1: the plugin machinery
    "hooks": 1,
    "storage": 1,
    # 2: what runs inside a Spark task, and the checkpoints it writes
    "api": 2,
    "runtime": 2,
    "exchange": 2,
    "state": 2,
    "sources": 2,
    "plan": 2,
    "checkpoint": 2,
    "metrics": 2,
    # 3: the Spark glue
    "spark": 3,
    # 4: the job on the driver
    "job": 4,
    # 5: the program a user builds on the driver
    "datastream": 5,
    # 6: test kits that drive tasks and the driver's commits together (flintlock.testing)
    "conformance": 6,
}
"""Each subpackage of core/ ("" for the modules at its top) and its layer."""

NEVER: dict[str, set[str]] = {
    "exchange": {"runtime", "state", "sources", "hooks"},
    "checkpoint": {"runtime", "state", "hooks"},
    "state": {"plan", "sources", "hooks"},
    "api": {"hooks", "sources"},
    "metrics": {"runtime", "exchange", "state", "sources", "plan", "hooks", "api"},
}
"""Within layer 2, the rooms each room does not import at run time: the exchange moves
messages and knows no operator; checkpoints are written by the runtime and the state
backends, and read without them; state knows no graph; the user's contracts no plugin
machinery; metrics are read from tasks and acknowledgements, and written to storage."""

OUTSIDE_CORE = ("flintlock.plugins", "flintlock.operators", "flintlock.sinks")
ANY_ROOM = {"testing", "harnesses", "harness_output"}
"""Top-level modules that may import every room: the harnesses drive the whole task."""


def core_modules() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


def room_of_path(path: Path) -> str:
    parts = path.relative_to(CORE).parts
    return parts[0] if len(parts) > 1 else ""


def room_of_module(module: str) -> str | None:
    """The room a ``flintlock.core...`` module name lies in, None if outside core/."""
    if module != "flintlock.core" and not module.startswith("flintlock.core."):
        return None
    parts = module.split(".")[2:]
    if not parts:
        return ""
    return parts[0] if (CORE / parts[0]).is_dir() else ""


def imports(path: Path) -> list[tuple[str, bool]]:
    """(module, annotation-only) for every import in ``path``, relative ones resolved."""
    tree = ast.parse(path.read_text())
    annotation_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            annotation_only.update(id(child) for child in ast.walk(node))
    package = "flintlock.core." + ".".join(path.relative_to(CORE).parent.parts)
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rstrip(".").split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from flintlock.core import x`` imports the module x
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        found.extend((name, id(node) in annotation_only) for name in names)
    return found


def test_every_subpackage_has_a_layer() -> None:
    rooms = {p.name for p in CORE.iterdir() if (p / "__init__.py").is_file()}
    assert rooms == set(LAYERS) - {""}


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_imports_none_of_plugins_operators_sinks(path: Path) -> None:
    wrong = [m for m, _ in imports(path) if m.startswith(OUTSIDE_CORE)]
    assert wrong == [], f"{path.relative_to(ROOT)} imports {wrong}: core/ never imports them"


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_down_the_layers(path: Path) -> None:
    room = room_of_path(path)
    if room == "" and path.stem in ANY_ROOM:
        return
    layer = LAYERS[room]
    wrong = []
    for module, annotation_only in imports(path):
        target = room_of_module(module)
        if target is None or annotation_only or target == room:
            continue
        if LAYERS[target] > layer or (room == "" and target != ""):
            wrong.append(f"{module} ({target or 'core/'}, layer {LAYERS[target]})")
    assert wrong == [], (
        f"{path.relative_to(ROOT)} ({room or 'core/'}, layer {layer}) imports {wrong}: "
        f"imports point down the layers of CONTRIBUTING.md's Layout"
    )


@pytest.mark.parametrize("room", sorted(NEVER))
def test_rooms_of_one_layer_keep_apart(room: str) -> None:
    for path in sorted((CORE / room).rglob("*.py")):
        wrong = [
            m
            for m, annotation_only in imports(path)
            if not annotation_only and room_of_module(m) in NEVER[room]
        ]
        assert wrong == [], f"{path.relative_to(ROOT)} imports {wrong}"


@pytest.mark.parametrize("room", ["runtime", "exchange"])
def test_the_task_runtime_and_exchange_never_import_the_driver_side(room: str) -> None:
    """Not even for annotations: nothing inside a task needs the job or the program."""
    for path in sorted((CORE / room).glob("*.py")):
        wrong = [m for m, _ in imports(path) if room_of_module(m) in ("job", "datastream")]
        assert wrong == [], f"{path.relative_to(ROOT)} imports {wrong}"


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_400_lines(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)} has {lines} lines: split it by concept"


def test_no_two_test_modules_share_a_basename() -> None:
    """pytest imports tests/ and tests/spark/ by basename: a second module of one name
    stops the whole run at collection (tests/spark/test_x_on_spark.py is the rule)."""
    seen: dict[str, Path] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        clash = seen.setdefault(path.name, path)
        assert clash == path, f"{path.relative_to(ROOT)} and {clash.relative_to(ROOT)}"


def test_no_folder_holds_more_than_15_modules() -> None:
    for folder in [CORE, *(p for p in CORE.iterdir() if p.is_dir() and p.name != "__pycache__")]:
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        assert len(modules) <= MAX_MODULES, f"{folder.relative_to(ROOT)} has {len(modules)}"


def test_the_layout_section_names_every_subpackage_and_pyproject_packages_it() -> None:
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    layout = contributing.split("## Layout", 1)[1].split("\n## ", 1)[0]
    listed = re.search(r"^packages = \[(.*?)\]", (ROOT / "pyproject.toml").read_text(), re.M | re.S)
    assert listed is not None
    packages = set(re.findall(r'"([\w.]+)"', listed.group(1)))
    for room in set(LAYERS) - {""}:
        assert re.search(rf"\b{room}/", layout), f"CONTRIBUTING's Layout does not name {room}/"
        assert f"flintlock.core.{room}" in packages, f"pyproject does not package {room}/"


CHECKPOINT_PATH = re.compile(r"/chk-\{")
"""A path to a checkpoint's folder or record spelled by hand (``f".../chk-{id}"``)."""
SPELLS_CHECKPOINT_PATHS = {"core/checkpoint/job_folder.py", "core/checkpoint/storage.py"}
"""``JobFolder`` (the job folder's paths) and ``CheckpointStorage`` (a task's snapshots)."""


def test_only_the_job_folder_spells_a_checkpoint_path() -> None:
    """Every path of a checkpoint in the job folder comes from ``JobFolder`` (its
    ``checkpoint_dir``, ``checkpoint_file``, ``commit_record``, ``run_checkpoint_dir``)."""
    spelled = [
        str(path.relative_to(ROOT))
        for folder in ("core", "flintlock")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if str(path.relative_to(ROOT)) not in SPELLS_CHECKPOINT_PATHS
        and CHECKPOINT_PATH.search(path.read_text())
    ]
    assert spelled == []
