"""The side-output splitter the harness tests and the Spark tests share: even rows out,
odd rows to ``ODD``, rows above 100 also to ``BIG``."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from flintlock import OutputTag, ProcessFunction

ODD = OutputTag("odd", pa.schema([("v", pa.int64())]))
BIG = OutputTag("big", pa.schema([("v", pa.int64()), ("note", pa.string())]))


class Split(ProcessFunction):
    """Even rows out, odd rows to a side output; rows above 100 also to another one."""

    output_schema = pa.schema([("v", pa.int64())])

    def process_element(self, value: dict[str, Any], ctx: Any, out: Any) -> None:
        if value["v"] % 2:
            ctx.output(ODD, {"v": value["v"]})
        else:
            out.collect({"v": value["v"]})
        if value["v"] > 100:
            ctx.output(BIG, {"v": value["v"], "note": "big"})
