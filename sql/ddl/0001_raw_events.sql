-- Raw event tables: one per topic, the envelope's columns plus the typed data, flattened where
-- queries need it. They are a queryable copy of the Kafka log (the log stays the source of
-- truth). All are ReplacingMergeTree on the deterministic event id, so re-ingests and replays
-- collapse; read them with FINAL (or argMax) where exact counts matter.

-- gpu.metrics, flattened to one row per GPU (or MIG instance) per sample.
CREATE TABLE IF NOT EXISTS gpu_samples
(
    event_id String,
    time DateTime64(3, 'UTC'),
    cluster LowCardinality(String),
    node LowCardinality(String),
    uuid String,
    mig_instance Nullable(UInt8),
    gpu_index Nullable(UInt16),
    gpu_model LowCardinality(String),
    mig_profile LowCardinality(String),
    utilization Nullable(Float32),
    gr_engine_active Nullable(Float32),
    gpu_util Nullable(Float32),
    fb_used_mib Nullable(Float32),
    power_w Nullable(Float32),
    energy_mj Nullable(Float64),
    xid Nullable(UInt16),
    namespace LowCardinality(String),
    pod String,
    hpc_job String,
    interval_s Nullable(Float32),
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(ingested_at)
-- monthly partitions: retention and re-ingest of a month touch one partition
PARTITION BY toYYYYMM(time)
-- node-then-time order serves per-node replays; uuid + instance make a sample unique
ORDER BY (cluster, node, time, uuid, ifNull(mig_instance, 255));

-- scheduler.allocations: attempt lifecycle per placement, submissions and node states.
CREATE TABLE IF NOT EXISTS raw_scheduler_allocations
(
    event_id String,
    type LowCardinality(String),
    source LowCardinality(String),
    schema_version UInt16,
    time DateTime64(3, 'UTC'),
    cluster LowCardinality(String),
    scheduler LowCardinality(String),
    job_id String,
    attempt UInt16,
    node LowCardinality(String),
    state LowCardinality(String),
    start_time Nullable(DateTime64(3, 'UTC')),
    end_time Nullable(DateTime64(3, 'UTC')),
    payload String CODEC(ZSTD(3)),
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(time)
-- job-first order: an attempt's events sit together; event_id makes the key unique
ORDER BY (cluster, job_id, attempt, time, event_id);

-- storage.io counters, one row per (node, time, filesystem/device, job).
CREATE TABLE IF NOT EXISTS storage_samples
(
    event_id String,
    time DateTime64(3, 'UTC'),
    cluster LowCardinality(String),
    node LowCardinality(String),
    fs_type LowCardinality(String),
    device String,
    job_id String,
    read_bytes Float64,
    write_bytes Float64,
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(time)
-- counters are differenced per (node, device, job) in time order
ORDER BY (cluster, node, fs_type, device, job_id, time);

-- storage.io checkpoint events.
CREATE TABLE IF NOT EXISTS checkpoints
(
    event_id String,
    cluster LowCardinality(String),
    job_id String,
    attempt Nullable(UInt16),
    kind LowCardinality(String),
    path String,
    bytes UInt64,
    started DateTime64(3, 'UTC'),
    finished DateTime64(3, 'UTC'),
    node LowCardinality(String),
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(finished)
-- lost-work lookups ask for a job's last checkpoint before a time
ORDER BY (cluster, job_id, finished, event_id);

-- benchmarks.runs: one row per nccl-tests run.
CREATE TABLE IF NOT EXISTS benchmark_runs
(
    event_id String,
    time DateTime64(3, 'UTC'),
    cluster LowCardinality(String),
    run_id String,
    collective LowCardinality(String),
    hosts Array(String),
    ranks UInt32,
    nccl_version String,
    avg_busbw_gbps Nullable(Float64),
    max_busbw_gbps Nullable(Float64),
    wrong_total UInt64,
    out_of_bounds UInt64,
    ok Bool,
    payload String CODEC(ZSTD(3)),
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(time)
-- fabric health compares runs of the same collective over time
ORDER BY (cluster, collective, time, run_id);

-- org.mappings: effective-dated reference data, flattened to (kind, key) -> value rows.
-- kind: team_business_unit | namespace_team | account_team
CREATE TABLE IF NOT EXISTS org_mappings
(
    event_id String,
    cluster LowCardinality(String),
    effective_from DateTime64(3, 'UTC'),
    kind LowCardinality(String),
    key String,
    value String,
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(ingested_at)
-- ASOF lookups: the latest effective_from <= a window's start per (kind, key)
ORDER BY (cluster, kind, key, effective_from);

-- pricing: effective-dated hourly rate per GPU model and the monthly shared costs.
CREATE TABLE IF NOT EXISTS pricing_rates
(
    event_id String,
    cluster LowCardinality(String),
    effective_from DateTime64(3, 'UTC'),
    currency LowCardinality(String),
    gpu_model LowCardinality(String),
    hourly_rate Decimal(18, 6),
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(ingested_at)
ORDER BY (cluster, gpu_model, effective_from);

CREATE TABLE IF NOT EXISTS pricing_shared
(
    event_id String,
    cluster LowCardinality(String),
    effective_from DateTime64(3, 'UTC'),
    currency LowCardinality(String),
    network Decimal(18, 6),
    storage Decimal(18, 6),
    support Decimal(18, 6),
    operations Decimal(18, 6),
    idle_policy LowCardinality(String),
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(ingested_at)
ORDER BY (cluster, effective_from);
