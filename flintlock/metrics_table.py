"""``flintlock metrics JOB``: a job's latest run's metrics as a table (or JSON).

The driver records each epoch's metrics in the job's folder, so this reads them from
there, from any process that sees the checkpoint storage, while the job runs or after."""

from __future__ import annotations

from typing import Any

from flintlock.core.checkpoint.job_folder import JobFolder
from flintlock.core.errors import JobControlError
from flintlock.core.metrics.recorder import latest_run, read_run_metrics
from flintlock.core.metrics.subtask import is_max

COLUMNS = (
    "records in",
    "records out",
    "in/s",
    "out/s",
    "busy ms/s",
    "watermark",
    "lag ms",
    "state",
)


def run_metrics(folder: JobFolder) -> dict[str, Any]:
    """The metrics of the job's latest run that kept any; an error naming the folder if
    none did."""
    run_id = latest_run(folder.storage, folder.path)
    metrics = read_run_metrics(folder.storage, folder.path, run_id) if run_id else {}
    if not metrics:
        raise JobControlError(
            f"job {folder.job_name!r} has no metrics in {folder.path}/metrics: it has not "
            f"completed an epoch with metrics on"
        )
    return metrics


def number(value: Any, digits: int = 0) -> str:
    """A figure for the table: thousands separated, ``-`` for none; an integer exactly
    (formatting it as a float would round 2**63 - 1 up to ...808)."""
    if value is None:
        return "-"
    if isinstance(value, int) and not digits:
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def watermark(value: int | None) -> str:
    """A watermark in ms; MAX_WATERMARK (Long.MAX_VALUE) is the end of the input."""
    return "end of input" if is_max(value) else number(value)


def size(value: int) -> str:
    """Bytes as kB or MB."""
    return f"{value / 1e6:,.1f} MB" if value >= 1e6 else f"{value / 1e3:,.1f} kB"


def metrics_table(metrics: dict[str, Any]) -> str:
    """Per vertex and subtask: the run's records in and out, the latest epoch's rates
    (records and busy ms per wall-clock second, as Flink's), watermark, lag and state;
    then user metrics and the last checkpoint."""
    latest = metrics["epochs"][-1]
    totals = metrics["totals"]
    checkpoint = latest["checkpoint"]
    rows: list[tuple[str, ...]] = [("vertex / subtask", *COLUMNS)]
    for name, total in totals["vertices"].items():
        vertex = latest["vertices"].get(name, {})
        rows.append((name, *row(total, vertex)))
        for index, sub_total in total["subtasks"].items():
            sub = vertex.get("subtasks", {}).get(index, {})
            rows.append((f"  #{index}", *row(sub_total, sub)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        f"run {metrics['run_id']}  epochs {totals['epochs']}  last checkpoint "
        f"chk-{checkpoint['id']} {size(checkpoint['sizeBytes'])} "
        f"{number(checkpoint['durationMs'], 1)} ms",
        *(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
            for r in rows
        ),
    ]
    user = user_lines(totals, latest)
    if user:
        lines += ["user metrics (counters and meters: the run; others: the latest epoch)", *user]
    return "\n".join(lines)


def row(total: dict[str, Any], latest: dict[str, Any]) -> tuple[str, ...]:
    """One vertex's or subtask's cells."""
    return (
        number(total.get("numRecordsIn")),
        number(total.get("numRecordsOut")),
        number(latest.get("numRecordsInPerSecond")),
        number(latest.get("numRecordsOutPerSecond")),
        number(latest.get("busyTimeMsPerSecond")),
        watermark(latest.get("currentInputWatermark")),
        number(latest.get("watermarkLagMs")),
        size(latest["stateSizeBytes"]) if "stateSizeBytes" in latest else "-",
    )


def user_lines(totals: dict[str, Any], latest: dict[str, Any]) -> list[str]:
    """One line per user metric of each operator."""
    lines = []
    for name, total in totals["vertices"].items():
        vertex = latest["vertices"].get(name, {})
        for op, figures in total["operators"].items():
            user = figures.get("user", {})
            now = vertex.get("operators", {}).get(op, {}).get("user", {})
            for metric, value in user.get("counters", {}).items():
                lines.append(f"  {op}  {metric}  counter  {value:,}")
            for metric, value in user.get("meters", {}).items():
                rate = now.get("meters", {}).get(metric, {}).get("rate")
                lines.append(f"  {op}  {metric}  meter  {value['count']:,} ({number(rate, 1)}/s)")
            for metric, value in now.get("histograms", {}).items():
                parts = ", ".join(f"{k} {number(v, 2)}" for k, v in value.items())
                lines.append(f"  {op}  {metric}  histogram  {parts}")
    return lines
