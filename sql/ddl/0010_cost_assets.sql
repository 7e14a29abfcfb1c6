-- Tables written by the Dagster assets (dagster_project/). Every daily asset rebuilds exactly one
-- day (delete that day, insert it again) and every monthly asset one month, so a backfill or a
-- re-run replaces rows instead of adding to them. Plain MergeTree: the asset owns its rows.

-- GPU-seconds per day and every owner dimension (allocated, unallocated and unavailable capacity).
CREATE TABLE IF NOT EXISTS gpu_usage_daily
(
    day Date,
    cluster LowCardinality(String),
    gpu_model LowCardinality(String),
    kind LowCardinality(String),
    scheduler LowCardinality(String),
    namespace LowCardinality(String),
    account LowCardinality(String),
    user LowCardinality(String),
    queue LowCardinality(String),
    workload_kind LowCardinality(String),
    team LowCardinality(String),
    business_unit LowCardinality(String),
    model LowCardinality(String),
    job_id String,
    logical_job String,
    attempt UInt16,
    outcome LowCardinality(String),
    failure_reason LowCardinality(String),
    gpu_seconds Float64,
    busy_seconds Float64,
    unobserved_seconds Float64,
    idle_seconds Float64
)
ENGINE = MergeTree
-- monthly partitions: the monthly assets read one month; a day is replaced with a DELETE of its rows
PARTITION BY toYYYYMM(day)
-- day-first: every reader asks for a day or a month of one cluster
ORDER BY (cluster, day, kind, business_unit, team, gpu_model, job_id, attempt);

-- Idle GPU-seconds per day by GPU model, node and team: allocated-but-idle, unallocated, unavailable.
CREATE TABLE IF NOT EXISTS idle_waste_daily
(
    day Date,
    cluster LowCardinality(String),
    gpu_model LowCardinality(String),
    node LowCardinality(String),
    kind LowCardinality(String),
    team LowCardinality(String),
    business_unit LowCardinality(String),
    gpu_seconds Float64,
    idle_seconds Float64,
    unobserved_seconds Float64
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(day)
-- by day, then the breakdowns finance and SRE filter on
ORDER BY (cluster, day, kind, gpu_model, node, team);

-- Failed attempts' GPU-seconds per day, and the part after their last completed checkpoint (lost work).
CREATE TABLE IF NOT EXISTS failure_waste_daily
(
    day Date,
    cluster LowCardinality(String),
    failure_reason LowCardinality(String),
    team LowCardinality(String),
    business_unit LowCardinality(String),
    model LowCardinality(String),
    gpu_model LowCardinality(String),
    scheduler LowCardinality(String),
    logical_job String,
    job_id String,
    attempt UInt16,
    last_checkpoint Nullable(DateTime64(3, 'UTC')),
    failed_gpu_seconds Float64,
    lost_gpu_seconds Float64
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(day)
-- by day, then reason: "which failures burned the most" reads a day range grouped by reason
ORDER BY (cluster, day, failure_reason, team, logical_job, attempt);

-- Queue time of the attempts that started on a day, per scheduler queue.
CREATE TABLE IF NOT EXISTS queue_time_daily
(
    day Date,
    cluster LowCardinality(String),
    scheduler LowCardinality(String),
    queue LowCardinality(String),
    workload_kind LowCardinality(String),
    attempts UInt64,
    wait_seconds Float64,
    p50_wait_seconds Float64,
    p95_wait_seconds Float64,
    max_wait_seconds Float64,
    waited_gpu_seconds Float64
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (cluster, day, scheduler, queue, workload_kind);

-- Every cost of a day as lines per term and owner, exact to 1e-12 (rounded to cents only monthly).
-- business_unit '__platform__' is the platform's unshared remainder.
CREATE TABLE IF NOT EXISTS cost_allocation_daily
(
    day Date,
    cluster LowCardinality(String),
    currency LowCardinality(String),
    term LowCardinality(String),
    business_unit LowCardinality(String),
    team LowCardinality(String),
    model LowCardinality(String),
    gpu_model LowCardinality(String),
    price_from DateTime64(3, 'UTC'),
    unit_price Decimal(38, 12),
    pricing_unit LowCardinality(String),
    quantity Float64,
    consumed_quantity Float64,
    consumed_unit LowCardinality(String),
    basis LowCardinality(String),
    cost Decimal(38, 12),
    gpu_hours Float64,
    busy_gpu_hours Float64,
    idle_gpu_hours Float64,
    failure_waste_gpu_hours Float64
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(day)
-- a month of one cluster is summed per term and owner
ORDER BY (cluster, day, term, business_unit, team, model, gpu_model, price_from);

-- A month's chargeback lines in cents (largest-remainder rounding per term); FOCUS rows are made
-- from these lines by dagster_project/defs/exports/focus.py.
CREATE TABLE IF NOT EXISTS chargeback_monthly
(
    month Date,
    cluster LowCardinality(String),
    currency LowCardinality(String),
    term LowCardinality(String),
    business_unit LowCardinality(String),
    team LowCardinality(String),
    model LowCardinality(String),
    gpu_model LowCardinality(String),
    price_from DateTime64(3, 'UTC'),
    unit_price Decimal(38, 12),
    pricing_unit LowCardinality(String),
    quantity Float64,
    consumed_quantity Float64,
    consumed_unit LowCardinality(String),
    basis LowCardinality(String),
    exact_cost Decimal(38, 12),
    cost Decimal(38, 2),
    gpu_hours Float64,
    busy_gpu_hours Float64,
    idle_gpu_hours Float64,
    failure_waste_gpu_hours Float64
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(month)
-- one business unit's file reads one month of one unit
ORDER BY (month, cluster, business_unit, term, team, model, gpu_model, price_from);

-- The effective cluster unit cost of a month, each term of the formula in its own column.
CREATE TABLE IF NOT EXISTS effective_cluster_unit_cost_monthly
(
    month Date,
    cluster LowCardinality(String),
    currency LowCardinality(String),
    compute Decimal(38, 2),
    network Decimal(38, 2),
    storage Decimal(38, 2),
    support Decimal(38, 2),
    operations Decimal(38, 2),
    idle Decimal(38, 2),
    retries Decimal(38, 2),
    total Decimal(38, 2),
    accepted_units Float64,
    unit_kind LowCardinality(String),
    unit_cost Nullable(Decimal(38, 6)),
    capacity_gpu_hours Float64,
    allocated_gpu_hours Float64,
    idle_gpu_hours Float64,
    lost_gpu_hours Float64
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(month)
ORDER BY (month, cluster);

-- Required GPUs per GPU model for a month's target work, with every factor of the sizing formula.
CREATE TABLE IF NOT EXISTS capacity_plan
(
    month Date,
    cluster LowCardinality(String),
    gpu_model LowCardinality(String),
    month_hours Float64,
    installed_gpus Float64,
    capacity_gpu_hours Float64,
    availability Float64,
    allocation Float64,
    success Float64,
    busy Float64,
    useful_gpu_hours Float64,
    useful_work_per_gpu_month Float64,
    target_work Float64,
    target_source LowCardinality(String),
    required_gpus Float64,
    additional_gpus Float64
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(month)
ORDER BY (month, cluster, gpu_model);

-- NCCL bus bandwidth per node set and day against its baseline; node sets below it are flagged.
CREATE TABLE IF NOT EXISTS fabric_health
(
    day Date,
    cluster LowCardinality(String),
    collective LowCardinality(String),
    node_set String,
    hosts Array(String),
    runs UInt32,
    failed_runs UInt32,
    avg_busbw_gbps Nullable(Float64),
    baseline_gbps Nullable(Float64),
    baseline_runs UInt32,
    baseline_scope LowCardinality(String),
    ratio Nullable(Float64),
    below_baseline Bool
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (cluster, day, collective, node_set);

-- Accepted workload units other than successful runs (e.g. tokens), when a source reports them.
CREATE TABLE IF NOT EXISTS workload_outputs
(
    event_id String,
    cluster LowCardinality(String),
    time DateTime64(3, 'UTC'),
    job_id String,
    unit LowCardinality(String),
    quantity Float64,
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(time)
-- the unit cost sums a month per cluster and unit; event_id makes a report unique
ORDER BY (cluster, unit, time, event_id);
