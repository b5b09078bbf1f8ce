"""The part of StreamTask shared by task types that read channels (one- and two-input).

Both inputs of a two-input task arrive as channels of one exchange, tagged with the input
index, so the one- and two-input task types differ only in how many inputs they read:
the run loop over the input gate, barrier alignment and end of input are written once
here, and an input that ended in an earlier epoch gets no second end_input."""

from __future__ import annotations

from flintlock.core.errors import ChannelError
from flintlock.core.events import (
    CheckpointBarrier,
    DataEvent,
    EndOfInputEvent,
    ProcessingTimeTick,
    Watermark,
    WatermarkEvent,
    WatermarkStatusEvent,
)
from flintlock.core.exchange.input_gate import InputGate
from flintlock.core.runtime.task import StreamTask


class InputStreamTask(StreamTask):
    """Feeds events from the task's input channels to the head of its chain."""

    num_inputs = 1

    def task_init(self) -> None:
        """Open the input gate over the channels of each input."""
        channels = self.environment.input_channels
        expected = self.exchanged_inputs()
        if sorted(channels) != expected:
            reads = f"1..{self.num_inputs}" if len(expected) == self.num_inputs else str(expected)
            raise ChannelError(
                f"a {self.task_type} task reads inputs {reads} over channels, "
                f"was given inputs {sorted(channels)}"
            )
        self.gate = InputGate(channels)
        restore = self.environment.restore
        info = self.info
        self.ended_before = (
            restore.ended_inputs(info.subtask_index, info.parallelism)
            if restore is not None
            else set()
        )
        """Inputs that ended in an earlier epoch: end_input is called once in a job's life."""

    def exchanged_inputs(self) -> list[int]:
        """The inputs that arrive over channels (all of them but a chained source's)."""
        return list(range(1, self.num_inputs + 1))

    def run(self) -> None:
        """Dispatch events until every input ended or a barrier ends the epoch."""
        gate, chain = self.gate, self.chain
        fire_processing_timers = self.processing_time.fire_due
        mails, run_mails = self.mailbox.mails, self.mailbox.run_pending
        for event in self.environment.input:
            if type(event) is DataEvent:
                gate.check_data(event.input_index, event.channel)
                chain.process_head(event.batch, event.input_index)
                fire_processing_timers()
                if mails:
                    run_mails()
            elif type(event) is WatermarkEvent:
                combined = gate.on_watermark(
                    event.input_index, event.channel, event.watermark.timestamp
                )
                if gate.status_changes:  # an idle input active again: say so first
                    self.pass_status_changes()
                if combined is not None:
                    chain.process_head_watermark(Watermark(combined), event.input_index)
                fire_processing_timers()
                if mails:
                    run_mails()
            elif type(event) is WatermarkStatusEvent:
                combined = gate.on_status(event.input_index, event.channel, event.idle)
                if combined is not None:
                    chain.process_head_watermark(Watermark(combined), event.input_index)
                self.pass_status_changes()
            elif type(event) is ProcessingTimeTick:
                fire_processing_timers()
                if mails:
                    run_mails()
            elif type(event) is EndOfInputEvent:
                if gate.on_end_of_input(event.input_index, event.channel):
                    if event.input_index not in self.ended_before:
                        chain.end_head_input(event.input_index)
                    if gate.all_ended:
                        self.input_ended = True
                        return
            elif type(event) is CheckpointBarrier:
                aligned = gate.on_barrier(event)
                if aligned is not None:
                    self.barrier = aligned
                    return
            else:
                raise ChannelError(f"unknown input event {event!r}")
        raise ChannelError("the input stopped before the end of the epoch (no barrier)")

    def ended_input_indices(self) -> list[int]:
        """The inputs that ended, in this epoch or an earlier one."""
        return sorted(self.ended_before | set(self.gate.ended_inputs))

    def pass_status_changes(self) -> None:
        """Tell the head which inputs became idle or active."""
        for input_index, idle in self.gate.take_status_changes():
            self.chain.process_head_watermark_status(idle, input_index)

    def await_barrier(self) -> CheckpointBarrier:
        """After the input ended only the final barrier may arrive."""
        for event in self.environment.input:
            if type(event) is ProcessingTimeTick:
                continue  # processing-time timers were quiesced before finish
            if type(event) is not CheckpointBarrier:
                raise ChannelError(f"{type(event).__name__} after the end of input")
            aligned = self.gate.on_barrier(event)
            if aligned is not None:
                return aligned
        raise ChannelError("the input stopped before the final checkpoint's barrier")
