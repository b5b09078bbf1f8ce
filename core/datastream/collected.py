"""A collecting sink's rows, read after the job ran (``DataStream.collect_async``).

The collect sink is a 2PC sink like any other, so its rows exist only once the job's
checkpoints committed: ``collect_async`` returns this handle at build time, as Flink's
``collectAsync`` does, and ``table()`` refuses until ``env.execute()`` ran."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from flintlock.core.errors import GraphError


class CollectedRows:
    """The rows the collect sink ``name`` committed, exactly once, once the job ran:
    ``table()`` after ``env.execute()`` (as Flink's ``collectAsync``)."""

    def __init__(self, sink: Any) -> None:
        self._sink = sink

    @property
    def name(self) -> str:
        """The sink's name (``result.collected[name]`` holds the same table)."""
        return str(self._sink.name)

    def table(self) -> pa.Table:
        """The committed rows; a GraphError before the job ran."""
        rows = self._sink.result
        if rows is None:
            raise GraphError(
                f"the collect sink '{self.name}' has no rows yet: run the job first "
                f"(env.execute()), then read them"
            )
        return rows

    def __repr__(self) -> str:
        state = "not run yet" if self._sink.result is None else f"{self._sink.result.num_rows} rows"
        return f"CollectedRows({self.name!r}, {state})"


def positional_name_refused(name: object) -> GraphError:
    """Why ``collect("kept")`` is refused: the name would be the job's, read as a sink's."""
    return GraphError(
        f"collect({name!r}) runs the job at once and returns its rows; the name would be "
        f"the job's. Name the job with collect(job_name=...) or execute_and_collect(...); to "
        f"add a collect sink that runs with env.execute(), use collect_async({name!r})"
    )
