"""What a user program is written against: functions and their contexts, keys, side outputs,
watermark strategies, windows and triggers, the 2PC sink interface."""
