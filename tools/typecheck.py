"""Run mypy on the package ``flintlock`` as it is installed, from a source checkout.

Why a wrapper: pyproject.toml's package-dir maps ``flintlock.core`` to core/ (and plugins/,
operators/, sinks/ likewise), which the editable install answers with an import hook that
mypy does not run. So this builds the installed layout as a tree of symbolic links under
.mypy_cache/, checks it with pyproject.toml's ``[tool.mypy]`` settings, and prints each
error with its path in the checkout. ``python tools/typecheck.py [mypy options]``; exits
with mypy's status.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / ".mypy_cache" / "flintlock_tree"
MAPPED = ("core", "plugins", "operators", "sinks")
"""pyproject.toml's package-dir: these folders are subpackages of ``flintlock``."""


def build_tree() -> Path:
    """``TREE/flintlock``: flintlock/'s files and the mapped folders, as links."""
    package = TREE / "flintlock"
    shutil.rmtree(TREE, ignore_errors=True)
    package.mkdir(parents=True)
    for entry in (ROOT / "flintlock").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for folder in MAPPED:
        (package / folder).symlink_to(ROOT / folder, target_is_directory=True)
    return package


def checkout_paths(report: str, package: Path) -> str:
    """mypy's report with the tree's paths spelled as the checkout's."""
    for prefix in (package.relative_to(ROOT), package):
        for folder in MAPPED:
            report = report.replace(f"{prefix}/{folder}/", f"{folder}/")
        report = report.replace(f"{prefix}/", "flintlock/")
    return report


def main(argv: list[str]) -> int:
    package = build_tree()
    options = ["--config-file", str(ROOT / "pyproject.toml"), *argv]
    out, err, status = api.run([*options, "--cache-dir", str(ROOT / ".mypy_cache")])
    sys.stdout.write(checkout_paths(out, package))
    sys.stderr.write(checkout_paths(err, package))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
