"""Per-batch cost of flintlock's operator chain vs calling the same functions directly.

A chain of 5 batch-level no-op operators on one 65,536-row batch, pushed through the
chain's per-batch entry point (``OperatorChain.process_head``, the call the task's input
loop makes per batch) of a real one-input task started by ``OneInputHarness``; the
baseline calls 5 no-op functions one after another. Also: the same chain with a plugin
that implements an unrelated hook (an unimplemented per-batch hook must cost nothing),
with plugins that do implement ``flintlock_operator_process_batch`` (what a hook costs),
and the harness's own ``process_batch`` (input event, greenlet switches, gate check).

Every case runs ``--rounds`` rounds of ``--calls`` calls, interleaved round by round so
drift hits all cases alike, with the garbage collector off during a round (as timeit
does). A round's time / calls is one sample; the table shows the minimum and the median
sample in µs per batch, and the overhead of each minimum over the baseline's minimum.

    python bench/chain_overhead.py [--rounds 20] [--calls 2000]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Generator
from typing import Any

import pluggy
import pyarrow as pa
import pyarrow.compute as pc

from flintlock.core.hooks.manager import hookimpl
from flintlock.core.runtime.execution_state import ExecutionState
from flintlock.core.runtime.operator import OneInputStreamOperator
from flintlock.operators.basic import MapOperator
from flintlock.testing import OneInputHarness

ROWS = 65_536
CHAIN_LENGTH = 5
CHAIN_BUDGET_US = 20.0
NOISE_US = 1.0

Step = Callable[[pa.RecordBatch, int], Any]


class NoOp(OneInputStreamOperator):
    """Emits each batch unchanged."""

    def process_batch(self, batch: pa.RecordBatch) -> None:
        self.output.emit(batch)


class OpenObserver:
    """Implements a hook unrelated to batches: the per-batch path must not notice."""

    @hookimpl
    def flintlock_operator_open(self, operator: Any, task: Any) -> None:
        pass


class BatchWrapper:
    """Wraps every operator's process_batch (a new-style pluggy wrapper)."""

    @hookimpl(wrapper=True)
    def flintlock_operator_process_batch(self, operator: Any) -> Generator[None, Any, Any]:
        return (yield)


class BatchObserver:
    """A plain implementation of the per-batch hook: runs after each process_batch."""

    @hookimpl
    def flintlock_operator_process_batch(self, operator: Any) -> None:
        pass


def identity(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch


def make_batch() -> pa.RecordBatch:
    keys = pa.array(range(ROWS), pa.int64())
    return pa.RecordBatch.from_arrays([keys, pc.multiply(keys, 2)], ["key", "value"])


def noop_chain() -> list[NoOp]:
    return [NoOp(name=f"noop{i}") for i in range(CHAIN_LENGTH)]


def map_chain() -> list[MapOperator]:
    return [MapOperator(identity, name=f"map{i}", batch=True) for i in range(CHAIN_LENGTH)]


class Case:
    """One measured variant: a per-batch call ``step(batch, 1)`` and its samples."""

    def __init__(
        self, name: str, step: Step, harness: OneInputHarness | None = None, info: bool = False
    ) -> None:
        self.name = name
        self.step = step
        self.harness = harness
        self.info = info
        self.samples_ns: list[float] = []

    def run_round(self, batch: pa.RecordBatch, calls: int) -> None:
        step = self.step
        gc.disable()
        try:
            started = time.perf_counter_ns()
            for _ in itertools.repeat(None, calls):
                step(batch, 1)
            elapsed = time.perf_counter_ns() - started
        finally:
            gc.enable()
        self.samples_ns.append(elapsed / calls)
        if self.harness is not None:
            # The tail's writer keeps every batch it is given (references to the same
            # batch): check it got them all, then empty it between rounds, untimed.
            out = self.harness.writer.batches
            assert len(out) == calls and out[-1] is batch, f"{self.name}: output lost"
            out.clear()

    @property
    def min_us(self) -> float:
        return min(self.samples_ns) / 1000

    @property
    def median_us(self) -> float:
        return statistics.median(self.samples_ns) / 1000


def direct_case() -> Case:
    f1 = f2 = f3 = f4 = f5 = identity  # five plain calls, no loop, no list

    def direct(batch: pa.RecordBatch, _input_index: int) -> pa.RecordBatch:
        return f5(f4(f3(f2(f1(batch)))))

    return Case("direct calls of 5 functions (baseline)", direct)


def chain_case(name: str, operators: list[Any], plugins: tuple[object, ...] = ()) -> Case:
    harness = OneInputHarness(*operators, plugins=plugins).open()
    assert harness.state is ExecutionState.RUNNING, harness.state
    return Case(name, harness.task.chain.process_head, harness)


def harness_case(name: str, operators: list[Any]) -> Case:
    harness = OneInputHarness(*operators).open()
    return Case(name, harness.process_batch, harness, info=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    batch = make_batch()
    baseline = direct_case()
    noop = chain_case("chain of 5 no-op operators", noop_chain())
    unrelated = chain_case(
        "  + plugin with an unrelated hook (open)", noop_chain(), (OpenObserver(),)
    )
    mapped = chain_case("chain of 5 map(batch=True, b -> b)", map_chain())
    cases = [
        baseline,
        noop,
        unrelated,
        mapped,
        chain_case("  + process_batch hook (wrapper)", noop_chain(), (BatchWrapper(),)),
        chain_case("  + process_batch hook (plain)", noop_chain(), (BatchObserver(),)),
        harness_case("harness.process_batch, 5 no-ops", noop_chain()),
    ]
    hooked = {c.name for c in cases if "process_batch hook" in c.name}
    for case in cases:  # warm-up: first calls, caches, branch predictors
        case.run_round(batch, args.calls)
        case.samples_ns.clear()
    started = time.perf_counter()
    for _ in range(args.rounds):
        for case in cases:
            case.run_round(batch, args.calls)
    seconds = time.perf_counter() - started
    for case in cases:
        if case.harness is not None:
            case.harness.complete()  # end input, finish, final checkpoint: a clean end
            assert case.harness.state is ExecutionState.FINISHED, case.harness.state

    print(
        f"Python {platform.python_version()}, pyarrow {pa.__version__}, "
        f"pluggy {pluggy.__version__}, {os.cpu_count()} CPUs, {sys.platform}"
    )
    print(
        f"{CHAIN_LENGTH} operators, one {ROWS:,}-row batch, {args.rounds} rounds x "
        f"{args.calls} calls, gc off in a round; µs per batch ({seconds:.1f} s measuring)"
    )
    print(f"{'case':<42}{'min':>9}{'median':>9}{'vs baseline (min)':>19}")
    for case in cases:
        note = "  (hook implemented)" if case.name in hooked else ""
        note = "  (informational)" if case.info else note
        print(
            f"{case.name:<42}{case.min_us:>9.2f}{case.median_us:>9.2f}"
            f"{case.min_us - baseline.min_us:>+18.2f}{note}"
        )
    chain_over = max(noop.min_us, mapped.min_us) - baseline.min_us
    hook_over = unrelated.min_us - noop.min_us
    print(
        f"{'PASS' if chain_over < CHAIN_BUDGET_US else 'FAIL'}: chain overhead (min) "
        f"{chain_over:.2f} µs per batch < {CHAIN_BUDGET_US:.0f} µs"
    )
    print(
        f"{'PASS' if abs(hook_over) < NOISE_US else 'FAIL'}: unimplemented hook adds "
        f"{hook_over:+.2f} µs per batch (min), < {NOISE_US:.0f} µs (noise)"
    )


if __name__ == "__main__":
    main()
