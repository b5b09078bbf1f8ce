"""The exchange between tasks: messages, their reader and writer, the input gate,
partitioners, key groups and the murmur hash."""
