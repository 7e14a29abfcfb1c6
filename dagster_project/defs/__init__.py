"""One folder per concept, each with the same files: assets, checks, partitions, resources, schedules."""
