"""Checkpoints: the coordinator, storage, snapshots, the reader, savepoints, restore, state
evolution, the commit log and the job's folder in checkpoint storage."""
