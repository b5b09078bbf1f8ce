"""What runs inside one subtask: StreamTask and its task-type bases, the operator chain, the
operator base, outputs, records, timers, processing time and the watermark emitter."""
