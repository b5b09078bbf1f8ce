"""Refuse a state value of the wrong type where it is written (``update``, ``add``,
``put``), by the descriptor's declared Arrow type, not later when it is snapshotted."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from flintlock.core.errors import StateTypeError

Check = Callable[[object], None]


def _fast_types(arrow_type: pa.DataType) -> tuple[set[type], tuple[int, int] | None]:
    """Python types that surely fit ``arrow_type`` (checked by a set lookup), and the
    bounds an int must be within; anything else is checked by Arrow itself."""
    if pa.types.is_integer(arrow_type):
        bits = arrow_type.bit_width
        if pa.types.is_signed_integer(arrow_type):
            return {int}, (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        return {int}, (0, 2**bits - 1)
    if pa.types.is_floating(arrow_type):
        return {float, int}, None
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return {str}, None
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return {bytes}, None
    if pa.types.is_boolean(arrow_type):
        return {bool}, None
    return set(), None


def type_check(arrow_type: pa.DataType | None, what: str) -> Check | None:
    """A per-call check of values for ``arrow_type`` (None when nothing is declared):
    a set lookup for plain ints, floats, strings, bytes and bools, Arrow for the rest."""
    if arrow_type is None:
        return None
    fast, bounds = _fast_types(arrow_type)

    def exact(value: object) -> None:
        try:
            pa.scalar(value, type=arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            shown = repr(value)
            shown = shown if len(shown) <= 80 else shown[:75] + " ..."
            raise StateTypeError(
                f"{what} (declared {arrow_type}) cannot hold {shown} "
                f"({type(value).__name__}): store a {arrow_type} value, or declare the "
                f"descriptor's arrow_type as what you store"
            ) from None

    if bounds is None:

        def check(value: object) -> None:
            if type(value) not in fast:
                exact(value)

        return check
    low, high = bounds

    def check_int(value: object) -> None:
        if type(value) is not int or not low <= value <= high:
            exact(value)

    return check_int
