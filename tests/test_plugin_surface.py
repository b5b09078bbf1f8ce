"""Plugin authors import from ``flintlock.plugin_api`` (and ``flintlock``), never from
``flintlock.core``: flintlock's own operators/, plugins/ and sinks/, the example plugin
package and CONTRIBUTING's snippets show it; the two surfaces list each object once."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import flintlock
import flintlock.errors
import flintlock.plugin_api

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_PLUGIN = ROOT / "examples" / "flintlock-example-plugin"
BUILT_IN_PLUGINS = ("operators", "plugins", "sinks")
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


def built_in_plugin_modules() -> list[Path]:
    return sorted(path for folder in BUILT_IN_PLUGINS for path in (ROOT / folder).rglob("*.py"))


PUBLIC = {
    "flintlock": set(flintlock.__all__),
    "flintlock.plugin_api": set(flintlock.plugin_api.__all__),
    "flintlock.errors": set(flintlock.errors.__all__),  # every error, raised or caught
    "flintlock.testing": None,  # the test harnesses, any name
}
"""The modules a plugin imports flintlock through, and the names each one lists."""


def is_built_in_plugin(module: str) -> bool:
    return any(
        module == f"flintlock.{folder}" or module.startswith(f"flintlock.{folder}.")
        for folder in BUILT_IN_PLUGINS
    )


def non_public_imports(source: str) -> list[str]:
    """Every flintlock module or name ``source`` imports other than through a public
    surface's listed names or a built-in plugin's module (relative imports left out)."""
    wrong = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported = [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported = [(node.module, alias.name) for alias in node.names]
        else:
            continue
        for module, name in imported:
            if module != "flintlock" and not module.startswith("flintlock."):
                continue
            if is_built_in_plugin(module):
                continue
            listed = PUBLIC.get(module, set())
            if module not in PUBLIC or (name is not None and listed and name not in listed):
                wrong.append(module if name is None else f"{module}.{name}")
    return wrong


@pytest.mark.parametrize(
    "path",
    built_in_plugin_modules() + example_plugin_sources(),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_every_plugin_imports_flintlock_only_through_its_public_surfaces(path: Path) -> None:
    """Built-in operators, task types, state backends, sources and sinks, and the example
    plugin, import flintlock as a third party would (annotation-only imports included):
    names listed in ``flintlock.__all__``, ``flintlock.plugin_api.__all__`` or
    ``flintlock.errors.__all__``, the test harnesses, or modules of the built-in
    plugins; never ``flintlock.core``."""
    wrong = non_public_imports(path.read_text())
    assert wrong == [], (
        f"{path.relative_to(ROOT)} imports {wrong}: use flintlock or flintlock.plugin_api"
    )


def test_the_user_api_and_the_plugin_api_list_each_object_once() -> None:
    user = {name: getattr(flintlock, name) for name in flintlock.__all__}
    plugin = {name: getattr(flintlock.plugin_api, name) for name in flintlock.plugin_api.__all__}
    assert sorted(user.keys() & plugin.keys()) == []
    twice = [name for name, value in plugin.items() if any(value is v for v in user.values())]
    assert twice == [], f"plugin_api lists {twice}, which flintlock.__all__ lists already"


def test_the_plugin_api_imports_only_core() -> None:
    """plugins/ imports plugin_api, so plugin_api importing plugins/ would be a cycle."""
    source = (ROOT / "flintlock" / "plugin_api.py").read_text()
    modules = [m for m in imported_modules(source) if m.startswith("flintlock")]
    assert modules and all(is_core(m) for m in modules), modules


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
