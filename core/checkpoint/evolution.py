"""Restored state against the state the job now declares: what may change, what may not.

A keyed state's stored Arrow type (from its snapshot files) meets the descriptor's
``arrow_type`` when the operator asks for the state. Compatible: the same type, a struct
that gained nullable fields (old values have them null), a null type (nothing was known).
Anything else (a field removed, renamed or retyped, a non-nullable field added, another
type) is a StateSchemaError naming the operator, the state and the column.
"""

from __future__ import annotations

import pyarrow as pa

from flintlock.core.checkpoint.snapshots import StateFile
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.core.errors import StateSchemaError


def stored_value_types(
    storage: CheckpointStorage, files: list[StateFile]
) -> dict[str, pa.DataType]:
    """State name -> the type of the ``value`` column its snapshot files hold (schemas only)."""
    types: dict[str, pa.DataType] = {}
    for file in files:
        if file.name not in types:
            schema = storage.read_schema(file.path)
            if "value" in schema.names:
                types[file.name] = schema.field("value").type
    return types


def check_restored_type(
    operator: str, state: str, kind: str, stored: pa.DataType, declared: pa.DataType | None
) -> None:
    """Refuse a declared type the stored values cannot be read as (see the module doc)."""
    if declared is None or kind not in ("value", "list"):
        return  # inferred types, and kinds whose stored column is not the declared type
    expected = pa.list_(declared) if kind == "list" else declared
    problem = _problem(stored, expected, "value")
    if problem is not None:
        raise StateSchemaError(
            f"operator '{operator}': restored state '{state}' cannot be read as declared: "
            f"{problem}; keep the old type, add only nullable fields, or start without this "
            f"state (a new state name)"
        )


def _problem(stored: pa.DataType, declared: pa.DataType, column: str) -> str | None:
    if stored.equals(declared) or pa.types.is_null(stored):
        return None
    if pa.types.is_struct(stored) and pa.types.is_struct(declared):
        for field in stored:
            index = declared.get_field_index(field.name)
            if index < 0:
                return f"column '{column}.{field.name}' was removed (or renamed)"
            problem = _problem(field.type, declared.field(index).type, f"{column}.{field.name}")
            if problem is not None:
                return problem
        for field in declared:
            if stored.get_field_index(field.name) < 0 and not field.nullable:
                return f"column '{column}.{field.name}' was added but is not nullable"
        return None
    if _is_list(stored) and _is_list(declared):
        return _problem(stored.value_type, declared.value_type, f"{column}[]")
    return f"column '{column}' was {stored}, it is declared {declared} now"


def _is_list(kind: pa.DataType) -> bool:
    return bool(pa.types.is_list(kind) or pa.types.is_large_list(kind))
