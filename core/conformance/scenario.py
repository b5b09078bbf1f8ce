"""One scenario's run: its output places, its jobs, and the checks that compare what
readers see with a plain-Python reference of the ids, naming the scenario on failure."""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Iterable
from typing import Any, NoReturn

from flintlock.core.conformance.job import KitJob
from flintlock.core.conformance.target import OutputPlace, SinkTarget
from flintlock.core.errors import SinkConformanceError

SHOWN = 10
"""Ids named in a failure, at most."""


class Scenario:
    """The output places and jobs of one scenario run against ``target`` in ``folder``."""

    def __init__(self, target: SinkTarget[Any], name: str, folder: str) -> None:
        self.target = target
        self.name = name
        self.folder = folder
        self.places: dict[str, OutputPlace] = {}
        self.expected: dict[str, list[int]] = {}

    def place(self, label: str = "out") -> OutputPlace:
        """A fresh output (made once per label)."""
        if label not in self.places:
            name = f"c{uuid.uuid4().hex[:10]}_{label}"
            folder = os.path.join(self.folder, name)
            os.makedirs(folder)
            self.places[label] = OutputPlace(name, folder)
        return self.places[label]

    def job(self, name: str = "job", outputs: Iterable[str] = ("out",), base: int = 0) -> KitJob:
        """A job writing ids from ``base`` to the places ``outputs`` (a sink uid each)."""
        places = {label: self.place(label) for label in outputs}
        checkpoints = os.path.join(self.folder, "checkpoints")
        return KitJob(self.target, places, checkpoints, name, base=base)

    def check(self, label: str, expected: Iterable[int], when: str) -> None:
        """What readers of place ``label`` see now is exactly ``expected``, each once."""
        reader = self.target.make_sink(self.place(label))
        table = self.target.read_committed(reader)
        seen = [int(i) for i in table.column("id").to_pylist()] if table.num_rows else []
        problem = id_problems(seen, list(expected))
        if problem:
            self.fail(f"{when}, output '{label}': {problem}")

    def expect(self, label: str, expected: Iterable[int]) -> None:
        """At the end, place ``label`` holds ``expected`` and nothing is left behind."""
        self.expected[label] = list(expected)

    def finish(self) -> None:
        """The end-of-scenario checks: every place's ids, and nothing left behind."""
        for label, ids in self.expected.items():
            self.check(label, ids, "at the end")
        for label, place in self.places.items():
            leftovers = self.target.left_behind(self.target.make_sink(place))
            if leftovers:
                self.fail(f"output '{label}': left behind {sorted(leftovers)[:SHOWN]}")

    def fail(self, problem: str, cause: BaseException | None = None) -> NoReturn:
        """Raise the SinkConformanceError naming the sink, the scenario and ``problem``."""
        message = f"{self.target.label} fails scenario '{self.name}': {problem}"
        raise SinkConformanceError(message) from cause


def id_problems(seen: list[int], expected: list[int]) -> str:
    """What is wrong with ``seen`` against ``expected`` ('' if each expected id is there
    once and nothing else): duplicate, missing and unexpected ids."""
    counts = Counter(seen)
    wanted = set(expected)
    problems = []
    duplicates = sorted(i for i, n in counts.items() if n > 1)
    if duplicates:
        problems.append(f"duplicate ids {_some(duplicates)} (committed more than once)")
    missing = sorted(wanted - counts.keys())
    if missing:
        problems.append(f"missing ids {_some(missing)} (never committed)")
    unexpected = sorted(counts.keys() - wanted)
    if unexpected:
        problems.append(f"unexpected ids {_some(unexpected)} (not committed by then)")
    if problems:
        problems.append(f"{len(seen)} rows seen, {len(expected)} expected")
    return "; ".join(problems)


def _some(ids: list[int]) -> str:
    shown = ", ".join(map(str, ids[:SHOWN]))
    return f"[{shown}{', ...' if len(ids) > SHOWN else ''}] ({len(ids)})"
