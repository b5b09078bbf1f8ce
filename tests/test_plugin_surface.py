"""Plugin authors import from ``flintlock.plugin_api`` (and ``flintlock``), never from
``flintlock.core``: the example plugin package and CONTRIBUTING's snippets show it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import flintlock.plugin_api

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_PLUGIN = ROOT / "examples" / "flintlock-example-plugin"
DOCUMENTS = ("CONTRIBUTING.md", "examples/flintlock-example-plugin/README.md")
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def imported_modules(source: str) -> list[str]:
    """Every module a piece of Python source imports, relative imports left out."""
    modules = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules.append(node.module)
            modules.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return modules


def example_plugin_sources() -> list[Path]:
    return sorted(
        path
        for folder in ("src", "tests")
        for path in (EXAMPLE_PLUGIN / folder).rglob("*.py")
        if "build" not in path.parts
    )


def is_core(module: str) -> bool:
    return module == "flintlock.core" or module.startswith("flintlock.core.")


@pytest.mark.parametrize(
    "path", example_plugin_sources(), ids=lambda p: str(p.relative_to(EXAMPLE_PLUGIN))
)
def test_the_example_plugin_imports_no_core_module(path: Path) -> None:
    core = [m for m in imported_modules(path.read_text()) if is_core(m)]
    assert core == [], f"{path} imports {core}: use flintlock.plugin_api or flintlock"


@pytest.mark.parametrize("document", DOCUMENTS)
def test_the_documents_snippets_import_no_core_module(document: str) -> None:
    blocks = BLOCK.findall((ROOT / document).read_text())
    assert blocks
    core = [m for block in blocks for m in imported_modules(block) if is_core(m)]
    assert core == [], f"{document} imports {core}: use flintlock.plugin_api or flintlock"


def test_the_example_plugin_uses_the_plugin_api() -> None:
    modules = {m for path in example_plugin_sources() for m in imported_modules(path.read_text())}
    assert "flintlock.plugin_api" in modules


def test_every_public_name_of_the_plugin_api_is_there_and_listed_once() -> None:
    names = flintlock.plugin_api.__all__
    assert len(names) == len(set(names))
    assert sorted(names) == sorted(n for n in vars(flintlock.plugin_api) if n in set(names))
    for name in names:
        assert getattr(flintlock.plugin_api, name) is not None


def test_contributing_names_the_plugin_api() -> None:
    assert "flintlock.plugin_api" in (ROOT / "CONTRIBUTING.md").read_text()
