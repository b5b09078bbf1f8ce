"""The job on the driver: the job master, the epoch loop, control, client, status, lease,
signals and checks."""
