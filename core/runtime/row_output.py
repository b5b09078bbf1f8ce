"""How per-record operators emit and chain, so that records pass between chained
per-record functions without an Arrow batch between each two.

Rows the functions collect become one batch per step (an input batch, a pass of timers)
and a last one at finish; where the next operator of the chain works per record too, the
rows go to it as they are (``RowsOutput``), and a run of such operators is one generated
loop per batch (``FusedRows``): each record's dict is built from the batch's columns and
goes through every function of the run before the next record's (as Flink's chained
operators pass records), with no list, Collector or Arrow batch between the functions. A
run ends at a ``process`` (its collector flushes once per batch) or at its last map /
flat_map."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import pyarrow as pa

from flintlock.core.api.functions import Collector
from flintlock.core.errors import tag_operator
from flintlock.core.runtime.output import ChainingOutput
from flintlock.core.runtime.records import column_values
from flintlock.core.runtime.row_batches import HeldOutputMixin, RowBatchBuilder

if TYPE_CHECKING:
    from flintlock.core.api.functions import Row
    from flintlock.core.hooks.runner import HookRunner
    from flintlock.core.runtime.operator import StreamOperator
    from flintlock.core.runtime.output import Output
    from flintlock.core.task_info import TaskInfo


class RowsOutput(ChainingOutput):
    """Links two per-record operators: rows (dicts) go on as they are, no Arrow batch.

    The chain wires it where both work per record, the first declares no output schema
    and no plugin wraps ``process_batch``. Inside a fused run the loop calls the next
    function itself (``FusedRows``); a ``process``'s collected rows come through
    ``emit_rows`` as a list, once per flush."""

    takes_rows = True

    def __init__(self, target: StreamOperator, hooks: HookRunner, task: TaskInfo) -> None:
        super().__init__(target, hooks, task)
        self._process_rows = target.process_rows  # type: ignore[attr-defined]

    def emit_rows(self, rows: list[Row]) -> None:
        """Send ``rows`` (not empty) to the next operator, as they are."""
        self.rows += len(rows)
        try:
            self._process_rows(rows)
        except BaseException as error:
            tag_operator(error, self.target.name, "process_batch")
            raise

    def seal(self, owner: str) -> None:
        super().seal(owner)
        self.emit_rows = self._emit_after_finish  # type: ignore[method-assign,assignment]


def emit_rows(output: Any, builder: RowBatchBuilder, rows: list[Row]) -> None:
    """Emit ``rows`` of a per-record function: as they are if the next operator takes
    rows and either no output schema is declared or the rows would come back from its
    batch unchanged (``passes_as_rows``); else as a batch (values cast to the schema)."""
    if output.takes_rows:
        if not builder.declared:
            if rows:
                builder.check_rows(rows)
                output.emit_rows(rows)
            return
        if rows and builder.passes_as_rows(rows):
            output.emit_rows(rows)
            return
    batch = builder.build(rows)
    if batch is not None:
        output.emit(batch)


class RowOutputMixin(HeldOutputMixin):
    """Collects rows (``self._collector``) and emits them through a RowBatchBuilder."""

    output: Output

    def _start_rows(self, operator_name: str, schema: pa.Schema | None) -> None:
        self._collector = Collector()
        self._builder = RowBatchBuilder(operator_name, schema)

    def _flush(self) -> None:
        if self._collector.rows:
            emit_rows(self.output, self._builder, self._collector.take())

    def after_timers(self) -> None:
        self._flush()

    def finish(self) -> None:
        super().finish()  # type: ignore[misc]
        self._flush()  # what the function's finish() collected
        self.emit_held()


FUSED_FILENAME = __file__ + ":fused"
"""The generated loops' file name: a flintlock frame, so failure reports find ``row``."""


class RowStage(NamedTuple):
    """One per-record step of a fused run: ``kind`` is map, filter, flat_map or process."""

    kind: str
    function: Callable[..., Any]
    operator: Any  # a per-record operator: a StreamOperator with its RowOutputMixin state


class FusedRows:
    """The run of per-record operators that starts at ``head``, compiled on first use."""

    def __init__(self, head: Any) -> None:
        self.output = head.output
        stages: list[RowStage] = [head.row_stage()]
        links: list[RowsOutput] = []
        output = head.output
        while isinstance(output, RowsOutput) and stages[-1].kind != "process":
            links.append(output)
            stages.append(output.target.row_stage())  # type: ignore[attr-defined]
            output = output.target.output
        self.stages, self.links = stages, links
        self.terminal = stages[-1].operator
        row_leading = getattr(head, "row_leading", None)
        self.leading: tuple[str, ...] = row_leading() if row_leading is not None else ()
        self._loops: dict[tuple[str, ...] | None, Any] = {}
        self._lines: dict[str, dict[int, int]] = {}

    def run_batch(
        self,
        batch: pa.RecordBatch,
        *leading: list[Any],
        columns: list[list[Any]] | None = None,
    ) -> None:
        """Every record of ``batch`` (not empty) through the run; ``leading`` are the
        per-record lists the head asks for (``row_leading``: keys, timestamps); ``columns``
        the batch's values if the head took them already."""
        names = tuple(batch.schema.names)
        loop = self._loops.get(names) or self._compile(names)
        if columns is None:
            columns = list(map(column_values, batch.columns))
        self._run(loop, batch.num_rows, *leading, *columns)

    def run_rows(self, rows: list[dict[str, Any]]) -> None:
        """Every row of ``rows`` (not empty) through the run."""
        loop = self._loops.get(None) or self._compile(None)
        self._run(loop, len(rows), rows)

    def _run(self, loop: Any, count: int, *inputs: Any) -> None:
        out: list[dict[str, Any]] = []
        if self.stages[-1].kind == "process" and "stamp" not in self.leading:
            self.terminal._ctx._timestamp = None  # no timestamp column
        try:
            counts = loop(out.append, *inputs)
        except BaseException as error:
            tag_operator(error, self._failed_stage(error).operator.name, "process_batch")
            raise
        for link, counted in zip(self.links, counts, strict=True):
            link.rows += count if counted < 0 else counted
        terminal = self.terminal
        if self.stages[-1].kind == "process":
            terminal._flush()
        else:
            emit_rows(terminal.output, terminal._builder, out)

    def _failed_stage(self, error: BaseException) -> RowStage:
        tb = error.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != FUSED_FILENAME:
            tb = tb.tb_next
        if tb is None:
            return self.stages[0]
        code = tb.tb_frame.f_code
        lines = self._lines.get(code.co_name + str(id(code)), {})
        return self.stages[lines.get(tb.tb_lineno, 0)]

    def _compile(self, names: tuple[str, ...] | None) -> Any:
        source, lines, scope = generate_loop(self.stages, names, self.leading if names else ())
        code = compile(source, FUSED_FILENAME, "exec")
        exec(code, scope)
        loop = self._loops[names] = scope["fused"]
        self._lines[loop.__code__.co_name + str(id(loop.__code__))] = lines
        return loop


def generate_loop(
    stages: list[RowStage], names: tuple[str, ...] | None, leading: tuple[str, ...] = ()
) -> tuple[str, dict[int, int], dict[str, Any]]:
    """The source of ``fused(emit, *inputs)``, the line -> stage map and its globals.

    ``names`` are the input columns (rows built from them) or None (a list of rows);
    ``leading`` inputs come first: "key" (a keyed head: the state backend's current key
    and ``ctx``'s key, set per record) and "stamp" (``ctx``'s timestamp). Column names
    enter the code only through ``repr``; functions only as globals."""
    scope: dict[str, Any] = {"__builtins__": {"zip": zip}}
    narrowing = [i for i, stage in enumerate(stages) if stage.kind in ("filter", "flat_map")]
    counters = [i for i in range(1, len(stages)) if narrowing and narrowing[0] < i]
    params = "".join(f"{name}s, " for name in leading)
    code = [f"def fused(emit, {params}" + ("rows):" if names is None else _columns(names) + "):")]
    code += [f"    n{i} = 0" for i in counters]
    if names is None:
        code.append("    for row in rows:")
    else:
        values = "".join(f"{name}, " for name in leading) + ", ".join(
            f"v{i}" for i in range(len(names))
        )
        code.append(f"    for {values}, in zip({params}{_columns(names)}, strict=True):")
        row = ", ".join(f"{name!r}: v{i}" for i, name in enumerate(names))
        code.append(f"        row = {{{row}}}")
        if "key" in leading:
            scope["backend"] = stages[0].operator.context.keyed_backend
            code.append("        backend.current_key = ctx0._key = key")
        if "stamp" in leading:
            code.append("        ctx0._timestamp = stamp")
        if leading:
            scope["ctx0"] = stages[0].operator._ctx
    lines: dict[int, int] = {}
    indent = "        "
    for index, stage in enumerate(stages):
        scope[f"f{index}"] = stage.function
        if index in counters:
            code.append(f"{indent}n{index} += 1")
        last = index == len(stages) - 1
        if stage.kind == "map":
            code.append(
                f"{indent}row = f{index}(row)" if not last else f"{indent}emit(f{index}(row))"
            )
        elif stage.kind == "filter":
            code.append(f"{indent}if not f{index}(row):")
            code.append(f"{indent}    continue")
            if last:
                code.append(f"{indent}emit(row)")
                lines[len(code) - 2] = index
        elif stage.kind == "flat_map":
            code.append(f"{indent}for row in f{index}(row):")
            lines[len(code)] = index
            indent += "    "
            if last:
                code.append(f"{indent}emit(row)")
            continue
        else:  # process: the run's end
            scope[f"ctx{index}"] = stage.operator._ctx
            scope[f"out{index}"] = stage.operator._collector
            code.append(f"{indent}f{index}(row, ctx{index}, out{index})")
        if stage.kind != "filter" or not last:
            lines[len(code) - (1 if stage.kind == "filter" else 0)] = index
    code.append(
        "    return ("
        + "".join(f"n{i}, " if i in counters else "-1, " for i in range(1, len(stages)))
        + ")"
    )
    return "\n".join(code) + "\n", lines, scope


def _columns(names: tuple[str, ...]) -> str:
    return ", ".join(f"c{i}" for i in range(len(names)))


class FusedRowsMixin:
    """For per-record operators: ``fused_rows()`` is the run that starts here (rebuilt if
    the output changed), ``process_rows`` takes rows from a per-record operator before."""

    output: Output
    _fused: FusedRows | None = None

    def fused_rows(self) -> FusedRows:
        """The run of per-record operators that starts at this one."""
        fused = self._fused
        if fused is None or fused.output is not self.output:
            fused = self._fused = FusedRows(self)
        return fused

    def process_rows(self, rows: list[Row]) -> None:
        """Rows (not empty) from the per-record operator before, through the run."""
        self.fused_rows().run_rows(rows)
