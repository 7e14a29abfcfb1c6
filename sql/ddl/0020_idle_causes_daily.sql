-- Why allocated GPUs sat idle, per day (docs/ATTRIBUTION.md "Idle causes"): report idle-causes'
-- split by cluster, node, team, business unit and model, rebuilt for a day by the Dagster asset
-- idle_causes_daily. `unobserved` rows are the allocated time without metrics, beside the causes.
CREATE TABLE IF NOT EXISTS idle_causes_daily
(
    day Date,
    cluster LowCardinality(String),
    node LowCardinality(String),
    team LowCardinality(String),
    business_unit LowCardinality(String),
    model LowCardinality(String),
    -- checkpoint | storage_stall | fabric_degraded | startup | teardown | idle | unobserved
    cause LowCardinality(String),
    idle_seconds Float64,
    cost Float64,
    currency LowCardinality(String)
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (cluster, day, cause, node, team);
