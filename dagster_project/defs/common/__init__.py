"""Pieces every concept shares: the warehouse resource, partitions and the partition-replacing writes."""
