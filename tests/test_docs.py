"""The docs run: every python block of CONTRIBUTING.md and README.md, and the hook reference
names every hookspec."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from flintlock.core import hookspecs

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def python_blocks(document: str) -> list[str]:
    return BLOCK.findall((ROOT / document).read_text())


def run_blocks(document: str) -> dict[str, Any]:
    """Run a document's blocks in order, in one namespace, as a reader would."""
    namespace: dict[str, Any] = {"__name__": f"docs_{document.replace('.', '_')}"}
    for number, block in enumerate(python_blocks(document), start=1):
        code = compile(block, f"{document} python block {number}", "exec")
        exec(code, namespace)
    return namespace


def hookspec_names() -> list[str]:
    return sorted(name for name in dir(hookspecs) if name.startswith("flintlock_"))


def test_contributing_python_blocks_run() -> None:
    assert len(python_blocks("CONTRIBUTING.md")) >= 6
    namespace = run_blocks("CONTRIBUTING.md")
    # the walk-throughs ran to their last line: their closing objects exist
    assert namespace["timer"].seconds.keys() == {"add_tax"}
    assert namespace["SNAPSHOTS"] == [1, 1]


@pytest.mark.slow
def test_readme_python_blocks_run(spark: Any) -> None:
    blocks = python_blocks("README.md")
    assert blocks, "README.md has its 20-line example"
    assert len(blocks[0].strip().splitlines()) <= 25
    namespace = run_blocks("README.md")
    assert sorted(namespace["table"].column("total").to_pylist()) == [1, 5, 7]


@pytest.mark.parametrize("hook", hookspec_names())
def test_every_hookspec_is_in_the_contributing_hook_reference(hook: str) -> None:
    reference = (ROOT / "CONTRIBUTING.md").read_text().split("## Hook reference", 1)[1]
    assert f"| `{hook}`" in reference
    assert (getattr(hookspecs, hook).__doc__ or "").strip(), f"{hook} has no docstring"
