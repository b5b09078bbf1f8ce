"""Count the uses of ``typing.Any`` in flintlock's code, per top folder and public surface.

Why: issue 33 asks for fewer ``Any`` where a real type exists; this gives the figure to
compare before and after a change (``python tools/count_any.py``, or ``--json``). A use is
a name ``Any`` or an attribute ``<module>.Any`` anywhere in a module's syntax tree, in
string annotations too; the ``import`` that brings it in is not a use.
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("core", "flintlock", "operators", "plugins", "sinks")
PUBLIC_SURFACES = (
    "flintlock/__init__.py",
    "flintlock/plugin_api.py",
    "flintlock/errors.py",
    "flintlock/testing.py",
)
"""The modules a job author or a plugin author imports from (CONTRIBUTING.md, "Layout")."""
PACKAGE_DIRS = {"flintlock.core": "core", "flintlock.plugins": "plugins"}
PACKAGE_DIRS |= {"flintlock.operators": "operators", "flintlock.sinks": "sinks"}
"""pyproject.toml's package-dir: where the modules of each subpackage lie in a checkout."""


def uses_of_any(source: str) -> int:
    """The uses of ``Any`` in one module's source."""
    count = 0
    for node in ast.walk(ast.parse(source)):
        named = isinstance(node, ast.Name) and node.id == "Any"
        if named or (isinstance(node, ast.Attribute) and node.attr == "Any"):
            count += 1
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            count += uses_in_string_annotation(node.value)
    return count


def uses_in_string_annotation(text: str) -> int:
    """The uses of ``Any`` in a string that parses as an annotation (``"dict[str, Any]"``)."""
    if "Any" not in text:
        return 0
    try:
        return uses_of_any(text.strip())
    except SyntaxError:  # prose, a docstring: no annotation
        return 0


def module_path(root: Path, module: str) -> Path | None:
    """The file of a ``flintlock...`` module in the checkout at root, None if none."""
    for package, folder in PACKAGE_DIRS.items():
        if module == package or module.startswith(f"{package}."):
            base = root / folder / Path(*module.split(".")[2:])
            break
    else:
        base = root / Path(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def definition(root: Path, module: str, name: str, depth: int = 0) -> ast.AST | None:
    """The class, function or assignment that defines ``name`` (following re-exports)."""
    path = module_path(root, module)
    if path is None or depth > 5:
        return None
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name == name:
                return node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return node
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            original = next((a.name for a in node.names if (a.asname or a.name) == name), None)
            if original is not None:
                return definition(root, node.module, original, depth + 1)
    return None


def public_uses(node: ast.AST) -> int:
    """The uses of ``Any`` in what a caller sees of a definition: not in private methods."""
    if isinstance(node, ast.ClassDef):
        parts: list[ast.AST] = [*node.bases, *node.keywords]
        for item in node.body:
            private = isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                item.name.startswith("_") and not item.name.startswith("__")
            )
            if not private:
                parts.append(item)
        return sum(uses_of_any(ast.unparse(part)) for part in parts)
    return uses_of_any(ast.unparse(node))


def public_api_uses(root: Path) -> int:
    """The uses of ``Any`` in the definitions of every name the public surfaces import."""
    seen: set[tuple[str, str]] = set()
    total = 0
    for surface in PUBLIC_SURFACES:
        for node in ast.parse((root / surface).read_text()).body:
            if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0):
                continue
            if not node.module.startswith("flintlock."):
                continue
            for alias in node.names:
                if (node.module, alias.name) in seen:
                    continue
                seen.add((node.module, alias.name))
                found = definition(root, node.module, alias.name)
                total += public_uses(found) if found is not None else 0
    return total


def count(root: Path = ROOT) -> dict[str, int]:
    """``{"core/": n, ..., "flintlock/plugin_api.py": n, "total": n}`` for the tree at root."""
    counts: dict[str, int] = {}
    for folder in FOLDERS:
        files = sorted((root / folder).rglob("*.py"))
        counts[f"{folder}/"] = sum(uses_of_any(path.read_text()) for path in files)
    for surface in PUBLIC_SURFACES:
        counts[surface] = uses_of_any((root / surface).read_text())
    counts["public API (definitions of the names above)"] = public_api_uses(root)
    counts["total"] = sum(counts[f"{folder}/"] for folder in FOLDERS)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, default=ROOT, help="a flintlock checkout")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    counts = count(args.root)
    if args.json:
        print(json.dumps(counts))
        return
    for name, n in counts.items():
        print(f"{name:<48} {n:>5}")


if __name__ == "__main__":
    main()
