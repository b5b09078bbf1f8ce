"""README's and CONTRIBUTING's references hold: every python block of README runs on its
own (it defines or imports every name it uses), every ``flintlock run X.py`` names a
file the repository has, every path CONTRIBUTING names exists."""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ANY_PYTHON_BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)


def readme_blocks() -> list[str]:
    return ANY_PYTHON_BLOCK.findall((ROOT / "README.md").read_text())


def free_names(source: str) -> set[str]:
    """Names a block reads that it never binds (assignment, import, def, class,
    parameter, loop or with target, except ... as) and that are not builtins."""
    tree = ast.parse(source)
    bound: set[str] = set(dir(builtins))
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return read - bound


def test_the_free_name_check_finds_what_a_block_borrows() -> None:
    assert free_names("import os\nx = os.sep + y\n") == {"y"}
    assert free_names("def f(a):\n    return [b for b in a]\n") == set()


@pytest.mark.parametrize("number", range(len(readme_blocks())))
def test_every_readme_python_block_runs_on_its_own(number: int) -> None:
    block = readme_blocks()[number]
    assert free_names(block) == set(), f"README python block {number + 1} borrows names"


def test_every_flintlock_run_in_readme_names_a_job_file_the_repository_has() -> None:
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"flintlock run\b[^`\n]*", readme)
    jobs = [word for command in commands for word in command.split() if word.endswith(".py")]
    assert "examples/orders_job.py" in jobs
    missing = sorted({job for job in jobs if not (ROOT / job).is_file()})
    assert missing == [], f"README runs job files it neither writes nor ships: {missing}"


TOP_LEVEL = {path.name for path in ROOT.iterdir() if not path.name.startswith(".")} | {".ci"}
CORE_ROOMS = {path.name for path in (ROOT / "core").iterdir() if path.is_dir()}
REPO_SUFFIXES = (".py", ".md", ".toml")


def contributing_paths() -> list[str]:
    """Backticked words of CONTRIBUTING.md that name a file or folder of the repository:
    under a top-level folder or a room of core/, or a Python/Markdown/TOML file name. A
    ``path: function`` or ``path::test`` keeps its path; placeholders (``<N>``) are no path."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    paths = []
    for span in re.findall(r"`([^`\n]+)`", text):
        word = re.split(r"::|: |\s", span.strip())[0].rstrip(":,")
        if not word or any(mark in word for mark in "<>*{}()=$'\""):
            continue
        first = word.split("/")[0]
        if ((first in TOP_LEVEL or first in CORE_ROOMS) and "/" in word) or (
            "/" not in word and word.endswith(REPO_SUFFIXES) and not word.startswith("_")
        ):
            paths.append(word)
    return paths


def exists(path: str) -> bool:
    if path.split("/")[0] in CORE_ROOMS and not (ROOT / path).exists():
        path = f"core/{path}"  # a room named as core/ names it ("job/", "datastream/")
    if "/" not in path:  # a bare file name: somewhere in the repository, not a venv
        return any(
            not found.relative_to(ROOT).parts[0].startswith(".") for found in ROOT.rglob(path)
        )
    return (ROOT / path.rstrip("/")).exists()


def test_contributing_refers_only_to_files_in_the_repository() -> None:
    paths = contributing_paths()
    assert len(paths) > 20 and "tests/test_docs.py" in paths  # the check sees the paths
    missing = sorted({path for path in paths if not exists(path)})
    assert missing == [], f"CONTRIBUTING.md names files the repository lacks: {missing}"


RESULTS_REFERENCE = re.compile(r'RESULTS\.md`?,?\s+\(?"([^"]+)"')
CODE_FOLDERS = ("core", "flintlock", "operators", "plugins", "sinks")


def results_sections() -> set[str]:
    """The names bench/RESULTS.md's headings go by: whole, without their closing
    parenthesis (``Epochs (`bench/epochs.py`)``), or up to a colon (``W4: W1's output``)."""
    names = set()
    for line in (ROOT / "bench" / "RESULTS.md").read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip()
            names |= {title, re.sub(r" \(.*\)$", "", title), title.split(":")[0]}
    return names


def results_references() -> list[tuple[str, str]]:
    """(file, section) for each ``bench/RESULTS.md, "section"`` that the code and
    CONTRIBUTING.md name, read across wrapped docstring and comment lines."""
    files = [ROOT / "CONTRIBUTING.md"]
    files += [path for folder in CODE_FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))]
    found = []
    for path in files:
        text = re.sub(r"\s*\n\s*#?\s*", " ", path.read_text())
        found += [(str(path.relative_to(ROOT)), name) for name in RESULTS_REFERENCE.findall(text)]
    return found


def test_the_code_points_only_to_sections_that_bench_results_has() -> None:
    references = results_references()
    assert len(references) > 10  # the check sees the references
    sections = results_sections()
    missing = sorted({ref for ref in references if ref[1] not in sections})
    assert missing == [], f"bench/RESULTS.md has no section of these names: {missing}"
