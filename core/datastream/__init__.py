"""The program a user writes on the driver: the environment, DataStream and its keyed,
windowed, connected and broadcast forms."""
