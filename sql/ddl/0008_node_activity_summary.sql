-- Which nodes are due for attribution, without reading all of `node_activity` every step.
--
-- `node_activity` gains one row per node per raw-sink batch for as long as the deployment runs.
-- The due-nodes query (sql/queries/attribution_pending.sql) needs, per node, the extent of all its
-- activity (kept here, folded by merges) and only the activity after the node's progress (read
-- from `node_activity` through the min-max index on `seq`, which skips every granule older than
-- the least-progressed due node).

CREATE TABLE IF NOT EXISTS node_activity_summary
(
    cluster LowCardinality(String),
    node LowCardinality(String),
    first_time SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
    max_time SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
    last_seq SimpleAggregateFunction(max, UInt64)
)
ENGINE = AggregatingMergeTree
-- one row per node once merged; readers still aggregate (min / max) across unmerged parts
ORDER BY (cluster, node);

CREATE MATERIALIZED VIEW IF NOT EXISTS node_activity_summary_mv TO node_activity_summary AS
SELECT cluster, node, min_time AS first_time, max_time, seq AS last_seq
FROM node_activity;

-- activity written before the summary existed (min and max: inserting it again changes nothing)
INSERT INTO node_activity_summary
SELECT cluster, node, min(min_time), max(max_time), max(seq)
FROM node_activity
GROUP BY cluster, node;

ALTER TABLE node_activity ADD INDEX IF NOT EXISTS seq_minmax seq TYPE minmax GRANULARITY 1;

ALTER TABLE node_activity MATERIALIZE INDEX seq_minmax;
