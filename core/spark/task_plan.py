"""The plan as the tasks of stages shared between jobs get it: the run's layout and the
epoch's part, both in the epoch's ``EPOCH_PROPERTY`` (``core/spark/epoch_frames.py``).

The layout holds the job's functions, so it is pickled as PySpark pickles a stage's
function (its cloudpickle, which honours ``register_pickle_by_value`` made through
``pyspark.cloudpickle``); it is never stored.
"""

from __future__ import annotations

import base64

from pyspark import cloudpickle

from flintlock.core.errors import FlintlockError
from flintlock.core.plan.execution import EPOCH_PROPERTY, ExecutionPlan

LAYOUT_SEPARATOR = "."
"""Between the layout and the epoch part (not a base64 letter)."""


def encoded_layout(plan: ExecutionPlan) -> str:
    """``plan`` without its epoch part, as text for a Spark local property."""
    return base64.b64encode(cloudpickle.dumps(plan.layout_only())).decode("ascii")


def with_layout(layout: str, epoch_part: str) -> str:
    """The property's text: the run's layout, then the epoch's part."""
    return f"{layout}{LAYOUT_SEPARATOR}{epoch_part}"


def plan_from_property(text: str | None) -> ExecutionPlan:
    """In a task of a shared stage: the epoch's plan from its ``EPOCH_PROPERTY``."""
    layout, separator, part = (text or "").partition(LAYOUT_SEPARATOR)
    if not separator:
        raise FlintlockError(
            f"a task of a shared epoch stage found no plan in the {EPOCH_PROPERTY!r} local "
            f"property (a stage run outside JobMaster.run_epoch)"
        )
    template: ExecutionPlan = cloudpickle.loads(base64.b64decode(layout))
    return template.for_epoch(part)
