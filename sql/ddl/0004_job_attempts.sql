-- One row per attempt of a logical job, versioned: the latest scheduler event wins.
CREATE TABLE IF NOT EXISTS job_attempts
(
    cluster LowCardinality(String),
    scheduler LowCardinality(String),
    job_id String,
    attempt UInt16,
    logical_job String,
    job_name String,
    version UInt64,
    state LowCardinality(String),
    submit_time Nullable(DateTime64(3, 'UTC')),
    start_time Nullable(DateTime64(3, 'UTC')),
    end_time Nullable(DateTime64(3, 'UTC')),
    outcome LowCardinality(String),
    failure_reason LowCardinality(String),
    exit_code Nullable(Int32),
    scheduler_state String,
    nodes Array(String),
    requested_gpus Float64,
    gpu_seconds Float64,
    queue_seconds Nullable(Float64),
    queue_gpu_seconds Nullable(Float64),
    last_checkpoint Nullable(DateTime64(3, 'UTC')),
    lost_gpu_seconds Float64,
    namespace LowCardinality(String),
    account LowCardinality(String),
    user LowCardinality(String),
    queue LowCardinality(String),
    workload_kind LowCardinality(String),
    team_label LowCardinality(String),
    model LowCardinality(String)
)
ENGINE = ReplacingMergeTree(version)
-- monthly by submission is not known for every event; the attempt key alone stays small
ORDER BY (cluster, scheduler, job_id, attempt);
