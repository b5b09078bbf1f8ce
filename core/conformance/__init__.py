"""The conformance kit for two-phase-commit sinks (``flintlock.testing``): scenarios that
run a real sink on its real storage through the task lifecycle and the driver's commit
order, and compare what readers see with the ids written."""
