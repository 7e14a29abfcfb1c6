-- The physical GPU inventory behind every written window, and claims that exceeded a GPU.
--
-- `physical_gpus` is the number of physical GPUs the node had in the window (GPUs seen recently,
-- its declared allocatable/gres count, GPUs named by placements): the conservation check compares
-- `capacity_seconds` with `physical_gpus * window_seconds`, not with the facts' own sum.
-- `conflict_seconds` is what claims on the node's GPUs asked for beyond their capacity (scaled
-- down so capacity holds, and listed in `attribution_conflicts`).
ALTER TABLE fact_windows ADD COLUMN IF NOT EXISTS physical_gpus Float64 DEFAULT 0;
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
