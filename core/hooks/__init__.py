"""The plugin machinery: hook specs, the hook runner, the plugin manager, the registry of
what plugins offer by name, and plugin reports from the workers to the driver."""
