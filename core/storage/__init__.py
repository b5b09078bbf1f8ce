"""Object-store settings shared by checkpoints, the job folder and sinks."""
