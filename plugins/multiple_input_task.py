"""The multiple-input task type (Flink's MultipleInputStreamTask): any number of inputs
arrive as channels of one exchange, tagged with their input index; each input ends on
its own (``end_input(i)`` in the order they really end) and ``finish`` follows the last.

Some inputs may instead be sources chained into the task (Flink's FLIP-182): read inside
the task, with no exchange before the head. They are read first, a batch from each in
turn, to the end of their epoch's splits; a source that ends its input sends
MAX_WATERMARK into its head input and then ``end_input(i)``; the exchanged inputs follow
up to the epoch's barrier. A source whose input ended in an earlier epoch sends
MAX_WATERMARK again (as a finished upstream task does), and no second ``end_input``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flintlock import (
    MAX_WATERMARK,
    ChannelError,
    MultipleInputStreamOperator,
    SourceOperator,
    hookimpl,
)
from flintlock.plugin_api import InputStreamTask


class MultipleInputStreamTask(InputStreamTask):
    """Runs a chain whose head is a MultipleInputStreamOperator, over as many inputs as
    the head has: each with its channels, or a chained source."""

    task_type = "multiple-input"
    head_operator_type = MultipleInputStreamOperator

    def task_init(self) -> None:
        self.num_inputs = self.chain.head.num_inputs  # the head says how many it reads
        self.sources: dict[int, SourceOperator] = {}
        for input_index, source in self.chain.sources.items():
            if not isinstance(source, SourceOperator) or not 1 <= input_index <= self.num_inputs:
                raise ChannelError(
                    f"a chained source feeds one of inputs 1..{self.num_inputs} of "
                    f"'{self.chain.head.name}' and is a SourceOperator; got input "
                    f"{input_index}: {type(source).__name__} '{source.name}'"
                )
            self.sources[input_index] = source
        if len(self.sources) == self.num_inputs:
            raise ChannelError(
                f"'{self.chain.head.name}': every input is a chained source; at least one "
                f"input must arrive over an exchange (it carries the epoch's barrier)"
            )
        super().task_init()
        self.sources_ended = {i for i in self.sources if i in self.ended_before}

    def exchanged_inputs(self) -> list[int]:
        return [i for i in range(1, self.num_inputs + 1) if i not in self.sources]

    def run(self) -> None:
        """The chained sources' epoch first, then the exchanged inputs to the barrier; the
        task's input ends once both did."""
        self.read_chained_sources()
        super().run()
        if self.input_ended and len(self.sources_ended) < len(self.sources):
            self.input_ended = False  # a chained source reads on in the next epoch

    def read_chained_sources(self) -> None:
        """Emit a batch from each chained source in turn until each read its epoch."""
        chain, fire_processing_timers = self.chain, self.processing_time.fire_due
        mails, run_mails = self.mailbox.mails, self.mailbox.run_pending
        for input_index in sorted(self.sources_ended):  # ended in an earlier epoch:
            chain.process_head_watermark(MAX_WATERMARK, input_index)  # holds nothing back
        reading = [(i, s) for i, s in self.sources.items() if i not in self.sources_ended]
        while reading:
            for entry in list(reading):
                input_index, source = entry
                if source.emit_next():
                    fire_processing_timers()
                    if mails:
                        run_mails()
                    continue
                reading.remove(entry)
                if source.ends_input:
                    chain.end_source_input(input_index)
                    self.sources_ended.add(input_index)

    def ended_input_indices(self) -> list[int]:
        return sorted(set(super().ended_input_indices()) | self.sources_ended)

    def records_in(self) -> int:
        """Records from the channels, and those the chained sources read."""
        return super().records_in() + sum(s.records_read for s in self.sources.values())

    def task_cleanup(self) -> None:
        """Close the chained sources' readers, after the operators closed."""
        for source in getattr(self, "sources", {}).values():
            source.close_reader()


@hookimpl
def flintlock_register_task_types(register: Callable[[str, Any], None]) -> None:
    register("multiple-input", MultipleInputStreamTask)
