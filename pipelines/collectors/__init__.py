"""Live collectors: read a source as it runs and hand its parsed events to the producer.

``base`` (the protocol, the dedupe wrapper, the run loop), ``prometheus`` (query_range windows)
and ``scrape`` (direct exporter scrapes) are shared; ``dcgm``, ``storage``, ``kubernetes`` and
``slurm`` are one module per source. Files of every source go through ``gpuledger ingest``.
"""
