"""The ``flintlock`` command: list plugins (``flintlock plugins``)."""

from __future__ import annotations

import argparse
import sys

from flintlock.core.plugin_manager import build_plugin_manager, installed_plugins
from flintlock.core.registry import KINDS, build_registry


def list_plugins() -> int:
    """Print every task type, state backend, operator and sink with its distribution."""
    distributions = {p.name: p.distribution for p in installed_plugins()}
    registry = build_registry(build_plugin_manager())
    for kind in KINDS:
        print(f"{kind}s:")
        for entry in registry.describe(kind):
            dist = distributions.get(entry.plugin_name, "?")
            print(f"  {entry.name:<20} {dist} ({entry.plugin_name})")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``flintlock`` console script."""
    parser = argparse.ArgumentParser(prog="flintlock", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("plugins", help="list installed task types, backends, operators, sinks")
    args = parser.parse_args(argv)
    if args.command == "plugins":
        return list_plugins()
    return 2


if __name__ == "__main__":
    sys.exit(main())
