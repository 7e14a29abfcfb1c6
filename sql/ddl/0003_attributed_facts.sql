-- Attributed GPU-seconds: one row per (window, node, GPU slot, owner). Written by the stream
-- workers; a window recomputed after a late event is written again with a higher `version`.
-- Rows of one (cluster, node, window) written together share `version`; `fact_windows` holds the
-- latest version of each, so an owner row that a correction removed is excluded by readers that
-- join on it (see sql/queries).
CREATE TABLE IF NOT EXISTS gpu_usage_facts
(
    fact_id String,
    version UInt64,
    cluster LowCardinality(String),
    window_start DateTime64(3, 'UTC'),
    window_seconds UInt32,
    node LowCardinality(String),
    gpu_uuid String,
    slot String,
    gpu_model LowCardinality(String),
    -- allocated | unallocated | unavailable
    kind LowCardinality(String),
    scheduler LowCardinality(String),
    job_id String,
    logical_job String,
    attempt UInt16,
    namespace LowCardinality(String),
    account LowCardinality(String),
    user LowCardinality(String),
    queue LowCardinality(String),
    workload_kind LowCardinality(String),
    team_label LowCardinality(String),
    model LowCardinality(String),
    gpu_seconds Float64,
    busy_seconds Float64,
    unobserved_seconds Float64,
    energy_joules Float64
)
ENGINE = ReplacingMergeTree(version)
-- monthly partitions: chargeback and unit cost are monthly; a month's facts rebuild together
PARTITION BY toYYYYMM(window_start)
-- window-first: every report filters a time range; fact_id (owner hash) makes the row unique
ORDER BY (cluster, window_start, node, slot, fact_id);

CREATE TABLE IF NOT EXISTS fact_windows
(
    cluster LowCardinality(String),
    node LowCardinality(String),
    window_start DateTime64(3, 'UTC'),
    version UInt64,
    capacity_seconds Float64,
    rows UInt32
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(window_start)
-- one row per (cluster, node, window): the latest write wins
ORDER BY (cluster, window_start, node);
