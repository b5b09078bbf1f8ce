"""``flintlock report``: the live page saved with its data, one HTML file that opens
without a server, so the report and the live page are one view to maintain.

The page's script reads the documents the server would answer (``/api/jobs``, the job's,
and each epoch's in the run log) from a JSON block in the file instead of fetching them;
it draws them once and polls nothing. Nothing is fetched when the file is opened."""

from __future__ import annotations

import json
import time
import urllib.parse
from typing import Any

from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.report.model import RunReport, read_report
from flintlock.ui.page import PAGE
from flintlock.ui.state import checkpoint_document, job_document, jobs_document

DATA_ID = "flintlock-data"
"""The id of the page's JSON block (the script looks for it)."""


def saved_documents(folder: JobFolder) -> tuple[dict[str, Any], RunReport]:
    """Every document the page of ``folder``'s job draws, keyed by the path the page
    would fetch it from, and the job's report they came from (the run log read once)."""
    storage, name = folder.storage, folder.job_name
    known: dict[str, dict[str, Any]] = {}
    report = read_report(folder, known)
    quoted = urllib.parse.quote(name, safe="!*'()")  # as the script's encodeURIComponent
    documents: dict[str, Any] = {
        "api/jobs": {**jobs_document(storage, name), "control": False},
        f"api/jobs/{quoted}": job_document(storage, name, known),
    }
    for epoch in report.epochs:
        entry = checkpoint_document(storage, name, epoch.checkpoint_id, known)
        if entry is not None:
            documents[f"api/jobs/{quoted}/checkpoints/{epoch.checkpoint_id}"] = entry
    return documents, report


def saved_page(folder: JobFolder) -> tuple[str, RunReport]:
    """The page of ``folder``'s job with its documents in it, and the job's report."""
    documents, report = saved_documents(folder)
    data = {"job": folder.job_name, "saved": time.time(), "documents": documents}
    # "<" escaped: no text in the data can end the script block early
    text = json.dumps(data, allow_nan=False).replace("<", "\\u003c")
    block = f'<script type="application/json" id="{DATA_ID}">{text}</script>\n'
    return PAGE.replace("<script>", block + "<script>", 1), report
