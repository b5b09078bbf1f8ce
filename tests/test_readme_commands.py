"""README's two set-up commands are exactly what CI runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_has_exactly_two_setup_commands_and_ci_runs_both() -> None:
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"```bash\n(.*?)\n```", readme, re.S)
    assert len(commands) == 2, commands
    ci = (ROOT / ".ci" / "run").read_text()
    for command in commands:
        assert "\n" not in command.strip()
        assert command.strip() in ci.replace('"$PYTHON"', "python3")
    assert "flintlock run examples/orders_job.py" in commands[0]
    assert "pytest" in commands[1]
