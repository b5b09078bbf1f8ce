"""``dedupe``: a keyed operator that lets through only the first row of every key.

Whether a key was seen lives in keyed state (one ``ValueState[bool]`` per key), so the
operator remembers its keys across checkpoints, restores and rescaling, like any keyed
Flink operator. It works per batch: the state of each distinct key of a batch is read
(and written) once, and the batch is filtered with one boolean mask.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from flintlock import OneInputStreamOperator, ValueState, ValueStateDescriptor

SEEN = ValueStateDescriptor("seen", pa.bool_(), default=False)
"""Per key: whether a row of that key has already been let through."""


class DedupeOperator(OneInputStreamOperator):
    """Drops every row whose ``key_column`` value it has let through before.

    Within a batch the first row of a new key is kept; rows whose key is null are
    always kept (there is no key to remember). Keys must be int, str or bytes, as for
    any keyed operator. On Spark with parallelism above 1, ``key_by`` the same column
    first, so that every key reaches the subtask that owns its state::

        stream.key_by("id").transform("dedupe", "dedupe", key_column="id")
    """

    def __init__(self, key_column: str, name: str | None = None) -> None:
        if not key_column:
            raise ValueError("dedupe needs the key column to deduplicate on")
        super().__init__(name or "dedupe")
        self.key_column = key_column  # makes the operator keyed: the task gives it state
        self._seen: ValueState[bool]

    def initialize_state(self) -> None:
        """Get the keyed ``seen`` flag; after a restore it holds the keys seen before."""
        self._seen = self.context.keyed_state(SEEN)

    def process_batch(self, batch: pa.RecordBatch) -> None:
        """Emit the rows of ``batch`` whose key is new (one batch, or nothing)."""
        keep = self._first_of_new_keys(batch.column(self.key_column).to_pylist())
        kept = batch.filter(pa.array(keep, pa.bool_()))
        if kept.num_rows:
            self.output.emit(kept)

    def _first_of_new_keys(self, keys: list[Any]) -> list[bool]:
        """Per row: True for a null key and for the first row of a key not seen before."""
        seen, set_key = self._seen, self.set_current_key
        decided: set[Any] = set()
        keep: list[bool] = []
        for key in keys:
            if key is None:
                keep.append(True)
            elif key in decided:
                keep.append(False)
            else:
                decided.add(key)
                set_key(key)
                new = not seen.value()
                if new:
                    seen.update(True)
                keep.append(new)
        return keep
