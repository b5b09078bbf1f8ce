"""Flink's metrics for flintlock: user metric groups in tasks, per-subtask figures that
travel with the acknowledgements, their aggregation on the driver, the job folder's
metric files and Prometheus' text format."""
