"""What a failed subtask tells its caller: a JSON-ready report, the same in-process and on
the driver, where the LifecycleError is rebuilt from the report a Spark task sent.

A worker's exception reaches the driver only as the text of Spark's error, wrapped in
Py4J's Java stack; the report travels in that text as one JSON line (``MARKER``), so the
user sees the same flintlock error, naming task, operator, phase and record, as in a test."""

from __future__ import annotations

import json
import os
import traceback
from dataclasses import asdict, dataclass, field
from types import TracebackType
from typing import Any

MARKER = "FLINTLOCK-TASK-FAILURE "
"""Starts the one line of a Spark task's error text that carries the report as JSON."""

_FRAMEWORK_DIRS = tuple(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep + part
    for part in ("core", "plugins", "operators", "sinks", "flintlock")
)
_RECORD_NAMES = ("row", "value", "record")
RECORD_CHARS = 300
"""How much of the offending record's repr an error shows."""


@dataclass
class FailureReport:
    """Where and why a subtask failed: job, checkpoint, task, attempt, operator, phase,
    the cause, the user's own traceback lines and, for per-record functions, the record."""

    job_name: str
    run_id: str
    checkpoint_id: int
    task_name: str
    task_type: str
    subtask_index: int
    parallelism: int
    attempt_number: int
    attempt_id: int
    phase: str
    cause_type: str
    cause_message: str
    operator: str | None = None
    operator_method: str | None = None
    operator_position: str | None = None
    canceled: bool = False
    user_traceback: list[str] = field(default_factory=list)
    record: str | None = None
    closing_errors: list[str] = field(default_factory=list)

    def message(self) -> str:
        """The error message: what failed first, then one line per fact."""
        if self.canceled:
            where = f"task canceled in {self.phase}"
        elif self.operator:
            where = f"operator '{self.operator}' failed in {self.operator_method}"
        else:
            where = f"task failed in {self.phase}"
        lines = [
            where,
            f"  task: {self.task_type} '{self.task_name}', subtask "
            f"{self.subtask_index}/{self.parallelism}, attempt {self.attempt_number}, "
            f"epoch {self.checkpoint_id}, phase {self.phase}",
            f"  job: '{self.job_name}', run {self.run_id}, checkpoint {self.checkpoint_id}, "
            f"Spark task attempt {self.attempt_id}",
        ]
        if self.operator:
            lines.append(f"  operator: '{self.operator}' ({self.operator_position})")
        if self.record is not None:
            lines.append(f"  record: {self.record}")
        lines.append(f"  caused by: {self.cause_type}: {self.cause_message}")
        if self.user_traceback:
            lines.append("  in your code (most recent call last):")
            lines.extend("    " + line for line in self.user_traceback)
        lines.extend(f"  also while closing: {error}" for error in self.closing_errors)
        return "\n".join(lines)

    def to_line(self) -> str:
        """The report as the one marker line a Spark task's error carries."""
        return MARKER + json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_text(cls, text: str) -> FailureReport | None:
        """The report in an error text (Spark's message of a failed task), if any."""
        for line in reversed(text.splitlines()):
            start = line.find(MARKER)
            if start >= 0:
                try:
                    return cls(**json.loads(line[start + len(MARKER) :]))
                except (ValueError, TypeError):
                    return None
        return None


def user_traceback(error: BaseException, limit: int = 10) -> list[str]:
    """The frames of ``error`` in the user's code (not flintlock's, pyspark's or greenlet's),
    as 'File ..., line N, in f' and the source line, most recent last."""
    lines: list[str] = []
    for frame in traceback.extract_tb(error.__traceback__)[-limit * 3 :]:
        filename = os.path.abspath(frame.filename)
        if filename.startswith(_FRAMEWORK_DIRS) or _is_library(filename):
            continue
        lines.append(f'File "{frame.filename}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"  {frame.line.strip()}")
    return lines[-2 * limit :]


def offending_record(error: BaseException) -> str | None:
    """The record a per-record function was given when it raised (repr, truncated).

    Read from the innermost flintlock frame that holds a dict named ``row`` (or ``value``)
    on the error's traceback: it costs nothing until a function fails."""
    found: Any = None
    tb: TracebackType | None = error.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if os.path.abspath(frame.f_code.co_filename).startswith(_FRAMEWORK_DIRS):
            for name in _RECORD_NAMES:
                value = frame.f_locals.get(name)
                if isinstance(value, dict):
                    found = value
                    break
        tb = tb.tb_next
    if found is None:
        return None
    text = repr(found)
    return text if len(text) <= RECORD_CHARS else text[: RECORD_CHARS - 5] + " ...}"


def _is_library(filename: str) -> bool:
    parts = filename.split(os.sep)
    return "site-packages" in parts and any(
        name in parts for name in ("pyspark", "greenlet", "py4j", "pyarrow", "pluggy")
    )
