"""``flintlock report JOB -o report.html``: one self-contained HTML page of a job's runs.

It is the live page (``flintlock ui``) saved with the job folder's documents in it
(``flintlock/ui/saved.py``): the graph, the checkpoints with each one's subtasks and
lifecycle timeline, the charts, the runs, the failures and the metrics; it opens
without a server and fetches nothing. ``model`` reads what both show from the folder.
"""

from __future__ import annotations

from flintlock.core.checkpoint.job_folder import IDENTITY, JobFolder
from flintlock.core.errors import JobControlError
from flintlock.report.model import RunReport, read_report

__all__ = ["RunReport", "job_report", "open_job_folder", "write_report"]


def open_job_folder(job: str, checkpoint_dir: str | None = None) -> JobFolder:
    """The folder of the job named by its folder, or by its name and checkpoint dir."""
    from flintlock.job_commands import client_for

    folder = client_for(job, checkpoint_dir).folder
    if not folder.storage.exists(f"{folder.path}/{IDENTITY}"):
        raise JobControlError(
            f"there is no job '{folder.job_name}' in {folder.storage.base_path} "
            f"(no {folder.path}/{IDENTITY}): has it ever started there?"
        )
    folder.open()
    return folder


def job_report(job: str, checkpoint_dir: str | None = None) -> RunReport:
    """What the report of a job shows, read from its folder (no Spark)."""
    return read_report(open_job_folder(job, checkpoint_dir))


def write_report(job: str, output: str, checkpoint_dir: str | None = None) -> RunReport:
    """Write the job's page, saved with its data, to ``output``; the job's report."""
    from flintlock.ui.saved import saved_page

    page, report = saved_page(open_job_folder(job, checkpoint_dir))
    with open(output, "w", encoding="utf-8") as file:
        file.write(page)
    return report
