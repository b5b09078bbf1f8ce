"""Checks of a program's arguments made as it is built: parallelism, user functions, key
selector functions; each raises a GraphError that says what to pass instead.

A program's mistakes are refused where they are made, on the driver before Spark starts
(CONTRIBUTING.md, "Keys"), rather than met as a failed task deep inside the job."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from flintlock.core.errors import GraphError


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_parallelism(parallelism: Any, max_parallelism: int, what: str) -> None:
    """Parallelism is an int in 1..max_parallelism (0 does not mean "the default")."""
    if not is_int(parallelism) or not 0 < parallelism <= max_parallelism:
        raise GraphError(
            f"{what} {parallelism!r} must be an int in 1..{max_parallelism} (max_parallelism)"
        )


def check_function(method: str, function: Any, base: type, callable_ok: bool = True) -> None:
    """A user function of the right kind (``base``) or, where allowed, a plain callable."""
    if isinstance(function, base) or (callable_ok and callable(function)):
        return
    allowed = f"a {base.__name__}" + (" or a callable" if callable_ok else "")
    raise GraphError(f"{method}: the function must be {allowed}, not {type(function).__name__}")


def check_one_argument(function: Callable[..., Any], where: str) -> None:
    """A key selector function is called with one argument, the row."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin without a signature: accept it
        return
    try:
        signature.bind(object())
    except TypeError:
        raise GraphError(
            f"{where}: a key selector function takes one argument (the row as a dict); "
            f"its signature is {signature}"
        ) from None
