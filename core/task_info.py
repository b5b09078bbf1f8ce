"""Who a running subtask is: the facts every hook, error and snapshot name carries.

One frozen object at core/'s top, so hooks, errors and file names all name a subtask the
same way; it carries Spark's task attempt id because a retried or speculative attempt
writes its own snapshot folder and staged files, and only the attempts a checkpoint lists
belong to it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaskInfo:
    """Identity of one subtask of one vertex in one epoch of one job run."""

    task_name: str
    task_type: str
    subtask_index: int = 0
    parallelism: int = 1
    max_parallelism: int = 128
    attempt_number: int = 0
    attempt_id: int = 0
    epoch: int = 1
    run_id: str = "local"
    job_name: str = "job"
    job_id: str = ""
    """Made at the job's first start; the same for every run of (checkpoint dir, job name)."""

    def __post_init__(self) -> None:
        if not 0 <= self.subtask_index < self.parallelism:
            raise ValueError(
                f"subtask index {self.subtask_index} outside parallelism {self.parallelism}"
            )
        if not 0 < self.parallelism <= self.max_parallelism:
            raise ValueError(
                f"parallelism {self.parallelism} must be in 1..max_parallelism "
                f"({self.max_parallelism})"
            )

    @property
    def key(self) -> str:
        """A short unique label, e.g. ``'map -> sink#1'``, used to group recorded calls."""
        return f"{self.task_name}#{self.subtask_index}"
