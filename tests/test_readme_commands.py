"""README's two set-up commands are exactly what CI runs, and start by upgrading pip."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Old pips install sdists without a pyproject.toml (pyspark's) by the legacy, warned-about
# `setup.py install`; an up-to-date pip and wheel in the new venv build a wheel instead.
UPGRADE = "pip install -q --upgrade pip wheel && "


def readme_commands() -> list[str]:
    return re.findall(r"```bash\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)


def test_readme_has_exactly_two_setup_commands_and_ci_runs_both() -> None:
    commands = readme_commands()
    assert len(commands) == 2, commands
    ci = (ROOT / ".ci" / "run").read_text()
    for command in commands:
        assert "\n" not in command.strip()
        assert command.strip() in ci.replace('"$PYTHON"', "python3")
    assert "flintlock run examples/orders_job.py" in commands[0]
    assert "pytest" in commands[1]


def test_each_setup_command_upgrades_pip_and_wheel_before_installing() -> None:
    for command in readme_commands():
        venv = re.match(r"python3 -m venv (\S+) && ", command)
        assert venv, command
        first_install = command.index("/bin/pip install")
        assert command[first_install:].startswith(f"/bin/{UPGRADE}"), command
        assert command[venv.end() :].startswith(f"{venv.group(1)}/bin/{UPGRADE}"), command


def test_contributing_sets_up_as_readme_does() -> None:
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    setup = re.search(r"```bash\n(python3 -m venv .*?)\n", contributing)
    assert setup, "CONTRIBUTING.md has its set-up line"
    assert readme_commands()[1].startswith(setup.group(1) + " && ")


def test_the_editable_install_builds_without_setuptools_folder_warning(tmp_path: Path) -> None:
    """``pip install -e .`` printed setuptools' 10-line warning about package folders in
    the working directory; the in-tree backend builds the editable wheel without it, and
    any other setuptools warning would still fail this build (``-W error``)."""
    build = (
        "import sys; sys.path.insert(0, 'build_backend'); import flintlock_build; "
        f"print(flintlock_build.build_editable({str(tmp_path)!r}))"
    )
    done = subprocess.run(
        [sys.executable, "-W", "error::setuptools.warnings.InformationOnly", "-c", build],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    wheel = done.stdout.strip().splitlines()[-1]
    assert wheel.startswith("flintlock-") and (tmp_path / wheel).exists()
    assert "same name as your package" not in done.stdout + done.stderr
