-- The physical GPU inventory behind every written window, and claims that exceeded a GPU.
--
-- `physical_gpus` is the number of physical GPUs the node had in the window (GPUs seen recently,
-- its declared allocatable/gres count, GPUs named by placements): the conservation check compares
-- `capacity_seconds` with `physical_gpus * window_seconds` (the window's length), not with the
-- facts' own sum.
-- `conflict_seconds` is what claims on the node's GPUs asked for beyond their capacity (scaled
-- down so capacity holds, and listed in `attribution_conflicts`).
ALTER TABLE fact_windows ADD COLUMN IF NOT EXISTS physical_gpus Float64 DEFAULT 0;
ALTER TABLE fact_windows ADD COLUMN IF NOT EXISTS window_seconds UInt32 DEFAULT 0;
ALTER TABLE fact_windows ADD COLUMN IF NOT EXISTS conflict_seconds Float64 DEFAULT 0;

-- One row per (window, node, GPU) whose claims exceeded it; written with the window's facts and
-- the same version, so readers keep only rows of the latest version in `fact_windows`.
CREATE TABLE IF NOT EXISTS attribution_conflicts
(
    cluster LowCardinality(String),
    node LowCardinality(String),
    window_start DateTime64(3, 'UTC'),
    version UInt64,
    gpu_uuid String,
    claimed_seconds Float64,
    capacity_seconds Float64,
    owners Array(String)
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(window_start)
-- one row per GPU and window; the latest write wins, as in fact_windows
ORDER BY (cluster, window_start, node, gpu_uuid);

-- The GPUs each node reported, per hour: a GPU that stops reporting stays in the node's capacity
-- (unavailable after a fatal XID, else unallocated and unobserved) for as long as it was seen
-- within the inventory horizon (streams/attribution/compute.py), without reading a day of samples
-- at every step. Fatal and clearing XID times give a GPU's state before the samples a step loads.
CREATE TABLE IF NOT EXISTS gpu_inventory
(
    cluster LowCardinality(String),
    node LowCardinality(String),
    hour DateTime('UTC'),
    uuid String,
    first_time SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
    last_time SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
    gpu_index SimpleAggregateFunction(anyLast, Nullable(UInt16)),
    gpu_model SimpleAggregateFunction(anyLast, String),
    last_fatal SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
    last_clear SimpleAggregateFunction(max, DateTime64(3, 'UTC'))
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(hour)
-- a step reads the hours of a group of nodes before its range
ORDER BY (cluster, node, hour, uuid);

CREATE MATERIALIZED VIEW IF NOT EXISTS gpu_inventory_mv TO gpu_inventory AS
SELECT cluster, node, toStartOfHour(time) AS hour, uuid, time AS first_time, time AS last_time, gpu_index,
       toString(gpu_model) AS gpu_model,
       if(xid IN (48, 63, 64, 74, 79, 92, 94, 95, 119, 120), time, toDateTime64(0, 3, 'UTC')) AS last_fatal,
       if(xid IS NOT NULL AND xid NOT IN (48, 63, 64, 74, 79, 92, 94, 95, 119, 120), time,
          toDateTime64(0, 3, 'UTC')) AS last_clear
FROM gpu_samples;

-- samples written before the inventory existed
INSERT INTO gpu_inventory
SELECT cluster, node, toStartOfHour(time) AS hour, uuid, min(time), max(time), anyLast(gpu_index),
       anyLast(toString(gpu_model)),
       maxIf(time, xid IN (48, 63, 64, 74, 79, 92, 94, 95, 119, 120)),
       maxIf(time, xid IS NOT NULL AND xid NOT IN (48, 63, 64, 74, 79, 92, 94, 95, 119, 120))
FROM gpu_samples
GROUP BY cluster, node, hour, uuid;
