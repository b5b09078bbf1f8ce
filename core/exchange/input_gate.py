"""A task's input channels: per-channel watermarks (min over the active ones, as Flink's
StatusWatermarkValve), idleness, end of input, barrier alignment, and the checks that make
a broken protocol an error rather than silent loss."""

from __future__ import annotations

from flintlock.core.errors import ChannelError
from flintlock.core.events import MIN_TIMESTAMP, CheckpointBarrier


class InputGate:
    """Tracks the channels of every input of one subtask."""

    def __init__(self, channels_per_input: dict[int, int]) -> None:
        self.channels_per_input = dict(channels_per_input)
        self._watermarks = {i: [MIN_TIMESTAMP] * n for i, n in self.channels_per_input.items()}
        self.input_watermark = {i: MIN_TIMESTAMP for i in self.channels_per_input}
        self._idle: dict[int, set[int]] = {i: set() for i in self.channels_per_input}
        self.input_idle = {i: False for i in self.channels_per_input}
        self.status_changes: list[tuple[int, bool]] = []
        """(input, idle) changes of whole inputs, for the task to pass on (then cleared)."""
        self._ended: dict[int, set[int]] = {i: set() for i in self.channels_per_input}
        self.ended_inputs: list[int] = []
        self._barriers: set[tuple[int, int]] = set()
        self._barrier: CheckpointBarrier | None = None

    @property
    def all_ended(self) -> bool:
        """True once every input ended."""
        return len(self.ended_inputs) == len(self.channels_per_input)

    def check_data(self, input_index: int, channel: int) -> None:
        """Data may only arrive on a known, open channel before its barrier."""
        self._check_channel(input_index, channel)
        if channel in self._ended[input_index]:
            raise ChannelError(f"data on input {input_index} channel {channel} after its end")
        if (input_index, channel) in self._barriers:
            raise ChannelError(f"data on input {input_index} channel {channel} after its barrier")

    def on_watermark(self, input_index: int, channel: int, timestamp: int) -> int | None:
        """The input's new combined watermark if this one advanced it, else None.

        A watermark on an idle channel makes it active again (a source that ends while
        idle still sends MAX_WATERMARK)."""
        self._check_channel(input_index, channel)
        if channel in self._idle[input_index]:
            self._idle[input_index].discard(channel)
            self._note_status(input_index)
        marks = self._watermarks[input_index]
        if timestamp <= marks[channel]:
            return None
        marks[channel] = timestamp
        return self._advance(input_index)

    def on_status(self, input_index: int, channel: int, idle: bool) -> int | None:
        """A channel became idle or active; the input's new combined watermark if that
        advanced it (an idle channel no longer holds it back), else None."""
        self._check_channel(input_index, channel)
        idle_channels = self._idle[input_index]
        if idle == (channel in idle_channels):
            return None
        if idle:
            idle_channels.add(channel)
        else:
            idle_channels.discard(channel)
        combined = self._advance(input_index)
        self._note_status(input_index)
        return combined

    def take_status_changes(self) -> list[tuple[int, bool]]:
        """The (input, idle) changes since the last call."""
        changes, self.status_changes = self.status_changes, []
        return changes

    def _advance(self, input_index: int) -> int | None:
        """Min over the active channels at or above the input's watermark (a channel
        active again below it is not counted until it catches up); if every channel is
        idle, the max over all of them."""
        marks, idle = self._watermarks[input_index], self._idle[input_index]
        last = self.input_watermark[input_index]
        active = [m for c, m in enumerate(marks) if m >= last and c not in idle]
        if active:
            combined = min(active)
        elif len(idle) == len(marks):
            combined = max(marks)
        else:
            return None
        if combined <= last:
            return None
        self.input_watermark[input_index] = combined
        return combined

    def _note_status(self, input_index: int) -> None:
        idle = len(self._idle[input_index]) == self.channels_per_input[input_index]
        if idle != self.input_idle[input_index]:
            self.input_idle[input_index] = idle
            self.status_changes.append((input_index, idle))

    def on_end_of_input(self, input_index: int, channel: int) -> bool:
        """Record one channel's end; True when this ended the whole input."""
        self._check_channel(input_index, channel)
        ended = self._ended[input_index]
        if channel in ended:
            raise ChannelError(f"input {input_index} channel {channel} ended twice")
        ended.add(channel)
        if len(ended) == self.channels_per_input[input_index]:
            self.ended_inputs.append(input_index)
            return True
        return False

    def channel_ended(self, input_index: int, channel: int) -> bool:
        """True once ``channel`` of ``input_index`` delivered its end of input."""
        return channel in self._ended[input_index]

    def on_barrier(self, barrier: CheckpointBarrier) -> CheckpointBarrier | None:
        """Align barriers: the barrier once every channel of every input delivered it."""
        self._check_channel(barrier.input_index, barrier.channel)
        if self._barrier is not None and self._barrier.checkpoint_id != barrier.checkpoint_id:
            raise ChannelError(
                f"barrier {barrier.checkpoint_id} while aligning barrier "
                f"{self._barrier.checkpoint_id}"
            )
        where = (barrier.input_index, barrier.channel)
        if where in self._barriers:
            raise ChannelError(f"two barriers on input {where[0]} channel {where[1]}")
        self._barrier = barrier
        self._barriers.add(where)
        if len(self._barriers) == sum(self.channels_per_input.values()):
            return barrier
        return None

    def _check_channel(self, input_index: int, channel: int) -> None:
        count = self.channels_per_input.get(input_index)
        if count is None:
            raise ChannelError(f"this task has no input {input_index}")
        if not 0 <= channel < count:
            raise ChannelError(f"input {input_index} has no channel {channel} (it has {count})")
