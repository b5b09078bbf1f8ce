"""``flintlock report JOB -o report.html``: one self-contained HTML page of a job's runs.

The job graph, a timeline of epochs, watermark progress, each subtask's lifecycle phases
as a Gantt chart, failures with task, operator and phase, and metrics where recorded;
charts by matplotlib (the ``report`` extra) as inline SVG, nothing fetched when opened.
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
    """What the report of a job shows, read from its folder (no Spark, no matplotlib)."""
    return read_report(open_job_folder(job, checkpoint_dir))


def write_report(job: str, output: str, checkpoint_dir: str | None = None) -> RunReport:
    """Write the job's report page to ``output``; needs the ``report`` extra (matplotlib)."""
    from flintlock.report.charts import load_pyplot
    from flintlock.report.page import render_page

    load_pyplot()  # refuse before reading anything when matplotlib is missing
    report = job_report(job, checkpoint_dir)
    page = render_page(report)
    with open(output, "w", encoding="utf-8") as file:
        file.write(page)
    return report
