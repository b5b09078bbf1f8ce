"""The plugin machinery: hook specs, the hook runner, the plugin manager and the registry of
what plugins offer by name."""
