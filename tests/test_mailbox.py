"""The task's mailbox (Flink's MailboxExecutor) in the harness: when mails run between
events, before finish and before the snapshot, never after close, and how a failing or
late mail fails the task — each as the exact sequence of calls."""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from flintlock import LifecycleError, OneInputStreamOperator, Watermark
from flintlock.errors import MailboxClosedError
from flintlock.testing import OneInputHarness, SourceHarness

MAX = 2**63 - 1


class MailingOperator(OneInputStreamOperator):
    """Logs its lifecycle and its mails; ``plan`` says which mails each call puts."""

    def __init__(self, log: list[str], plan: dict[str, list[str]] | None = None) -> None:
        super().__init__("mailer")
        self.log, self.plan = log, plan or {}
        self.batches = 0

    def put(self, when: str) -> None:
        for mail in self.plan.get(when, []):
            self.mailbox.execute(lambda mail=mail: self.on_mail(mail), mail)  # type: ignore[misc]

    def on_mail(self, mail: str) -> None:
        self.log.append(f"mail {mail}")
        if mail.startswith("boom"):
            raise ValueError(f"{mail} went off")
        self.put(f"in {mail}")
        if mail.startswith("emit"):
            self.output.emit(pa.record_batch({"x": [99]}))

    def process_batch(self, batch: pa.RecordBatch) -> None:
        self.batches += 1
        self.log.append(f"process {self.batches}")
        self.put(f"process {self.batches}")
        self.output.emit(batch)
        if self.plan.get("raise in process") == [str(self.batches)]:
            raise RuntimeError("process failed")

    def process_watermark(self, watermark: Watermark, input_index: int = 1) -> None:
        self.log.append(f"watermark {watermark.timestamp}")
        self.put("watermark")
        super().process_watermark(watermark, input_index)

    def end_input(self, input_index: int) -> None:
        self.log.append("end_input")
        self.put("end_input")

    def finish(self) -> None:
        self.log.append("finish")
        self.put("finish")

    def snapshot_state(self, checkpoint_id: int) -> None:
        self.log.append(f"snapshot {checkpoint_id}")

    def close(self) -> None:
        self.log.append("close")


def batch(x: int) -> pa.RecordBatch:
    return pa.record_batch({"x": [x]})


def test_mails_run_after_their_event_in_order_and_before_the_next_one() -> None:
    log: list[str] = []
    plan = {"process 1": ["a", "emit b"], "in a": ["c"], "watermark": ["d"]}
    harness = OneInputHarness(MailingOperator(log, plan))
    harness.process_batch(batch(1))
    harness.process_watermark(5)
    harness.process_batch(batch(2))
    harness.checkpoint(1)
    assert log == [
        "process 1",
        "mail a",
        "mail emit b",
        "mail c",  # put by mail a: after the mails already waiting
        "watermark 5",
        "mail d",
        "process 2",
        "snapshot 1",
        "close",
    ]
    assert [r["x"] for r in harness.output_rows()] == [1, 99, 2]  # b's row between the batches


def test_waiting_mails_run_before_finish_and_a_mail_put_in_finish_is_refused() -> None:
    log: list[str] = []
    harness = OneInputHarness(MailingOperator(log, {"end_input": ["e"], "in e": ["f"]}))
    harness.process_batch(batch(1))
    harness.complete(1)
    assert log == [
        "process 1",
        f"watermark {MAX}",
        "end_input",
        "mail e",
        "mail f",  # put by e: the waiting mails and those they put
        "finish",
        "snapshot 1",
        "close",
    ]

    late: list[str] = []
    refused = OneInputHarness(MailingOperator(late, {"finish": ["too late"]}))
    with pytest.raises(LifecycleError) as failed:
        refused.complete(1)
    assert late == [f"watermark {MAX}", "end_input", "finish", "close"]
    assert failed.value.phase == "finish"
    assert failed.value.operator == "mailer"
    assert isinstance(failed.value.__cause__, MailboxClosedError)
    assert "'mailer' put the mail 'too late' in or after its finish" in str(failed.value)


def test_a_mail_that_raises_fails_the_task_naming_the_operator_and_the_mail() -> None:
    log: list[str] = []
    harness = OneInputHarness(MailingOperator(log, {"process 1": ["boom", "never"]}))
    with pytest.raises(LifecycleError) as failed:
        harness.process_batch(batch(1))
    assert log == ["process 1", "mail boom", "close"]  # the mail after it never runs
    assert failed.value.phase == "run"
    assert failed.value.operator == "mailer"
    assert "mail 'boom'" in str(failed.value)
    assert "boom went off" in str(failed.value)


def test_no_mail_runs_after_close_and_one_put_then_is_refused() -> None:
    log: list[str] = []
    operator = MailingOperator(log, {"raise in process": ["1"], "process 1": ["pending"]})
    harness = OneInputHarness(operator)
    with pytest.raises(LifecycleError, match="process failed"):
        harness.process_batch(batch(1))
    assert log == ["process 1", "close"]  # the mail put before the failure never ran
    with pytest.raises(MailboxClosedError, match="after the task's operators closed"):
        operator.mailbox.execute(lambda: None, "after close")


def test_a_mail_from_another_thread_waits_for_the_next_event_or_the_snapshot() -> None:
    log: list[str] = []
    operator = MailingOperator(log)
    harness = OneInputHarness(operator)
    harness.process_batch(batch(1))
    worker = threading.Thread(
        target=operator.mailbox.execute, args=(lambda: log.append("mail from a thread"), "t")
    )
    worker.start()
    worker.join()
    assert log == ["process 1"]  # the task is waiting for input: nothing runs yet
    harness.checkpoint(1)
    assert log == ["process 1", "mail from a thread", "snapshot 1", "close"]


class WaitingOperator(OneInputStreamOperator):
    """Sends each batch to a thread and emits its answer through the mailbox; end_input
    waits (``yield_``) until every answer came, as an async operator drains."""

    def __init__(self, log: list[str]) -> None:
        super().__init__("waiter")
        self.log = log
        self.in_flight = 0

    def process_batch(self, batch: pa.RecordBatch) -> None:
        self.in_flight += 1

        doubled = pa.record_batch({"x": pc.multiply(batch["x"], 2)})

        def answer() -> None:
            self.mailbox.execute(lambda: self.emit(doubled), "answer")

        threading.Timer(0.05, answer).start()

    def emit(self, batch: pa.RecordBatch) -> None:
        self.in_flight -= 1
        self.log.append(f"answer {batch['x'][0]}")
        self.output.emit(batch)

    def end_input(self, input_index: int) -> None:
        self.log.append("end_input")
        while self.in_flight:
            assert self.mailbox.yield_(timeout=10), "an answer did not come in 10 s"
        self.log.append("drained")

    def finish(self) -> None:
        self.log.append("finish")


def test_an_operator_waits_for_its_answers_with_yield_before_finish() -> None:
    log: list[str] = []
    harness = OneInputHarness(WaitingOperator(log))
    harness.process_batch(batch(1))
    harness.process_batch(batch(2))
    harness.complete(1)
    assert log[0] == "end_input" and log[3:] == ["drained", "finish"]
    assert sorted(log[1:3]) == ["answer 2", "answer 4"]  # in the order the threads answered
    assert sorted(r["x"] for r in harness.output_rows()) == [2, 4]


def test_a_source_task_runs_mails_between_its_batches() -> None:
    log: list[str] = []
    mailer = MailingOperator(log, {"process 1": ["m"]})
    rows: list[dict[str, Any]] = [{"x": 1}, {"x": 2}]
    from flintlock.core.sources.source import CollectionSource

    SourceHarness(CollectionSource(rows, batch_size=1), mailer).run()
    assert log[:4] == ["process 1", "mail m", "process 2", f"watermark {MAX}"]
