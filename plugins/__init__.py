"""flintlock's built-in plugins: task types and state backends, registered by entry point."""
