-- Progress of the stream workers, kept in the warehouse so that any worker (after a crash or a
-- rebalance) continues where the last one stopped, and so `ingest --wait` can see it.

-- One row per (node, batch) written by the raw sink: which event times the batch touched.
CREATE TABLE IF NOT EXISTS node_activity
(
    cluster LowCardinality(String),
    node LowCardinality(String),
    min_time DateTime64(3, 'UTC'),
    max_time DateTime64(3, 'UTC'),
    allocations Bool,
    seq UInt64
)
ENGINE = MergeTree
-- the timer reads, per node, the rows after the last processed seq
ORDER BY (cluster, node, seq);

-- How far each node's windows are written, and the last activity seq they include.
CREATE TABLE IF NOT EXISTS attribution_progress
(
    cluster LowCardinality(String),
    node LowCardinality(String),
    closed_until DateTime64(3, 'UTC'),
    processed_seq UInt64,
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
-- one row per node; the latest version wins
ORDER BY (cluster, node);
