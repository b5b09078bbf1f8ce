"""The job graph a program builds and the execution plan every task of an epoch is told."""
