"""The driver's view of an epoch's metrics: the acknowledgements' per-subtask figures,
their rates, and their sums per operator and per vertex; and a run's totals.

A subtask's figures reach the driver only in its acknowledgement, so the driver is where
they meet: rates are worked out here, per second of wall-clock time as Flink's are, and
summed per operator and vertex for the metric files, Prometheus and ``flintlock metrics``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flintlock.core.metrics.subtask import is_max

if TYPE_CHECKING:
    from flintlock.core.checkpoint.snapshots import TaskAcknowledgement

RECORDS = ("numRecordsIn", "numRecordsOut")
RATES = ("numRecordsInPerSecond", "numRecordsOutPerSecond")


def with_rates(metrics: dict[str, Any], wall_seconds: float) -> dict[str, Any]:
    """A subtask's figures plus Flink's per-second ones and its watermark lag, for the
    subtask and for each of its operators. As in Flink, a rate is per second of wall-clock
    time (``wall_seconds``: the time the epoch's figures cover, waits between epochs
    included), never per second the task ran: a task that ran 5 ms of a 1 s epoch was
    busy 5 ms/s, and its 50 rows came at 50/s."""
    now_ms = metrics["time"] * 1e3

    def per_second(count: float) -> float:
        return count / wall_seconds if wall_seconds > 0 else 0.0

    def rates(figures: dict[str, Any]) -> dict[str, Any]:
        mark = figures.get("currentInputWatermark")
        return {
            **figures,
            "numRecordsInPerSecond": per_second(figures["numRecordsIn"]),
            "numRecordsOutPerSecond": per_second(figures["numRecordsOut"]),
            "watermarkLagMs": None if mark is None or is_max(mark) else now_ms - mark,
        }

    def user_rates(user: dict[str, Any]) -> dict[str, Any]:
        meters = {
            name: {**meter, "rate": per_second(meter["count"])}
            for name, meter in user.get("meters", {}).items()
        }
        return {**user, "meters": meters} if meters else user

    operators = {
        name: {**rates(op), "user": user_rates(op.get("user", {}))}
        for name, op in metrics.get("operators", {}).items()
    }
    return {
        **rates(metrics),
        "busyTimeMsPerSecond": min(per_second(metrics["busyTimeMs"]), 1000.0),
        "operators": operators,
    }


def min_watermark(marks: list[int | None]) -> int | None:
    """The least watermark (Flink's min over subtasks); None if one has none yet."""
    if not marks or any(m is None for m in marks):
        return None
    return min(m for m in marks if m is not None)


def merge_user(documents: list[dict[str, Any]]) -> dict[str, Any]:
    """User metrics summed over subtasks: counters and meters added, histograms' count,
    min, max and (weighted) mean; gauges and percentiles stay per subtask."""
    merged: dict[str, Any] = {}
    for document in documents:
        for name, value in document.get("counters", {}).items():
            counters = merged.setdefault("counters", {})
            counters[name] = counters.get(name, 0) + value
        for name, value in document.get("meters", {}).items():
            meter = merged.setdefault("meters", {}).setdefault(name, {"count": 0})
            meter["count"] += value["count"]
            if "rate" in value:  # a run's totals keep counts only
                meter["rate"] = meter.get("rate", 0.0) + value["rate"]
        for name, value in document.get("histograms", {}).items():
            merged.setdefault("histograms", {}).setdefault(name, []).append(value)
    for name, parts in merged.get("histograms", {}).items():
        merged["histograms"][name] = merge_histograms(parts)
    return merged


def merge_histograms(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """count, min, max and mean of several subtasks' histograms of one metric."""
    filled = [p for p in parts if "mean" in p]
    count = sum(p["count"] for p in parts)
    if not filled:
        return {"count": count}
    weight = sum(p["count"] for p in filled)
    return {
        "count": count,
        "min": min(p["min"] for p in filled),
        "max": max(p["max"] for p in filled),
        "mean": sum(p["mean"] * p["count"] for p in filled) / weight if weight else 0.0,
    }


def vertex_figures(subtasks: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One vertex's figures of an epoch from its subtasks' (finished ones carry none)."""
    running = [m for m in subtasks.values() if m.get("operators")]
    operators: dict[str, Any] = {}
    for name in running[0]["operators"] if running else []:
        parts = [m["operators"][name] for m in running]
        operators[name] = {
            **{k: sum(p[k] for p in parts) for k in (*RECORDS, *RATES, "stateSizeBytes")},
            "currentInputWatermark": min_watermark([p["currentInputWatermark"] for p in parts]),
            "user": merge_user([p["user"] for p in parts]),
        }
    summed = (*RATES, "stateSizeBytes")
    mark = min_watermark([m["currentInputWatermark"] for m in running])
    lags = [m["watermarkLagMs"] for m in running if m["watermarkLagMs"] is not None]
    return {
        "parallelism": len(subtasks),
        **{k: sum(m.get(k, 0) for m in subtasks.values()) for k in RECORDS},
        **{k: sum(m[k] for m in running) for k in summed},
        "busyTimeMsPerSecond": max((m["busyTimeMsPerSecond"] for m in running), default=0.0),
        "currentInputWatermark": mark,
        "watermarkLagMs": max(lags) if mark is not None and lags else None,
        "operators": operators,
        "subtasks": subtasks,
    }


def epoch_document(
    acknowledgements: list[TaskAcknowledgement], epoch: dict[str, Any]
) -> dict[str, Any]:
    """One epoch's metrics: ``epoch``'s fields (epoch, checkpoint_id, kind, final,
    seconds, time, intervalSeconds), the vertices' figures and the checkpoint's. Rates
    are per second of ``intervalSeconds`` (the wall-clock time since the previous epoch
    ended), or of the epoch's own ``seconds`` where no interval is given."""
    wall_seconds = epoch.get("intervalSeconds") or epoch.get("seconds") or 0.0
    by_vertex: dict[str, dict[str, Any]] = {}
    for ack in sorted(acknowledgements, key=lambda a: (a.task_name, a.subtask_index)):
        metrics = ack.metrics
        figures: dict[str, Any] = (
            with_rates(metrics, wall_seconds) if metrics else {"finished": True}
        )
        figures.setdefault("numRecordsIn", ack.records_in)
        figures.setdefault("numRecordsOut", ack.records_out)
        figures["checkpointSizeBytes"] = metrics.get("checkpointSizeBytes", ack.size_bytes)
        by_vertex.setdefault(ack.task_name, {})[str(ack.subtask_index)] = figures
    vertices = {name: vertex_figures(subtasks) for name, subtasks in by_vertex.items()}
    per_subtask = {
        name: {i: m["checkpointSizeBytes"] for i, m in subtasks.items()}
        for name, subtasks in by_vertex.items()
    }
    durations = [m.get("checkpointDurationMs", 0.0) for s in by_vertex.values() for m in s.values()]
    checkpoint = {
        "id": epoch.get("checkpoint_id"),
        "kind": epoch.get("kind"),
        "final": epoch.get("final"),
        "durationMs": max(durations, default=0.0),
        "epochDurationMs": epoch.get("seconds", 0.0) * 1e3,
        "sizeBytes": sum(sum(s.values()) for s in per_subtask.values()),
        "bytesPerSubtask": per_subtask,
    }
    return {**epoch, "vertices": vertices, "checkpoint": checkpoint}


def watermarks(document: dict[str, Any]) -> dict[str, int | None]:
    """Each vertex's input watermark in the epoch (ms, None before the first)."""
    return {name: v["currentInputWatermark"] for name, v in document["vertices"].items()}


def new_totals() -> dict[str, Any]:
    """A run's totals before its first epoch."""
    return {"epochs": 0, "checkpointBytes": 0, "vertices": {}}


def add_epoch(totals: dict[str, Any], document: dict[str, Any]) -> None:
    """Add one epoch to a run's totals, per vertex, subtask, and operator of each: records
    in and out, user counters and meter counts (Flink's counters count the whole run);
    and the checkpoint's bytes."""
    totals["epochs"] += 1
    totals["checkpointBytes"] += document["checkpoint"]["sizeBytes"]
    for name, figures in document["vertices"].items():
        total = totals["vertices"].setdefault(
            name, {"numRecordsIn": 0, "numRecordsOut": 0, "subtasks": {}, "operators": {}}
        )
        add_records(total, figures)
        add_operators(total, figures)
        for index, sub in figures["subtasks"].items():
            kept = total["subtasks"].setdefault(index, {"numRecordsIn": 0, "numRecordsOut": 0})
            add_records(kept, sub)
            if sub.get("operators"):
                add_operators(kept, sub)


def add_operators(total: dict[str, Any], figures: dict[str, Any]) -> None:
    """Add each operator's records and user counts in ``figures`` to ``total``."""
    for op, values in figures["operators"].items():
        kept = total.setdefault("operators", {}).setdefault(op, {"user": {}})
        add_records(kept, values)
        kept["user"] = merge_user([kept["user"], counts_only(values.get("user", {}))])


def run_totals(epochs: list[dict[str, Any]]) -> dict[str, Any]:
    """A run's totals over ``epochs`` (``add_epoch`` for each)."""
    totals = new_totals()
    for document in epochs:
        add_epoch(totals, document)
    return totals


def add_records(total: dict[str, Any], figures: dict[str, Any]) -> None:
    """Add ``figures``' records in and out to ``total``."""
    for key in RECORDS:
        total[key] = total.get(key, 0) + figures.get(key, 0)


def counts_only(user: dict[str, Any]) -> dict[str, Any]:
    """The parts of user metrics that add up over epochs: counters and meter counts."""
    kept: dict[str, Any] = {}
    if user.get("counters"):
        kept["counters"] = dict(user["counters"])
    if user.get("meters"):
        kept["meters"] = {k: {"count": v["count"]} for k, v in user["meters"].items()}
    return kept
