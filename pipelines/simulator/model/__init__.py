"""The simulated cluster (nodes, GPUs, schedulable slots) and the jobs that run on it."""
