-- Org mappings per cluster (docs/ATTRIBUTION.md "Owner"). A version ingested for a cluster
-- (`ingest org --cluster C`) applies to that cluster only; a version ingested without one is stored
-- with cluster '*' and applies to every cluster for the times when no version of its own is in
-- force. The version in force for (cluster, time): the cluster's latest own version starting at or
-- before it, else the latest '*' version starting at or before it. `org_scope` says whose rows
-- resolve it (the cluster's name, or '*'); a version is a full snapshot within its scope.
--
-- The rule is applied where windows get their version: `resolved_facts` here and the hourly
-- rollup's rebuild (sql/queries/usage_hourly_rebuild.sql, which stores org_version and org_scope);
-- everything else reads those two.

-- Failure reasons (docs/ATTRIBUTION.md "Attempts and failure waste"): an attempt the scheduler
-- reports as an application error (or without a reason) one of whose GPUs showed a fatal XID
-- between 5 minutes before its end and 1 minute after failed because of its GPU: `gpu_error`, or
-- `node_failure` for XID 79 (fallen off the bus). Resolved when reading (`attempt_outcomes`), so
-- XID samples that arrive after the attempt's end still count.
CREATE TABLE IF NOT EXISTS gpu_fatal_xids
(
    cluster LowCardinality(String),
    node LowCardinality(String),
    uuid String,
    time DateTime64(3, 'UTC'),
    xid UInt16
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(time)
-- looked up per (cluster, node) around an attempt's end
ORDER BY (cluster, node, time, uuid);

CREATE MATERIALIZED VIEW IF NOT EXISTS gpu_fatal_xids_mv TO gpu_fatal_xids AS
SELECT cluster, node, uuid, time, assumeNotNull(xid) AS xid
FROM gpu_samples
WHERE xid IN (48, 63, 64, 74, 79, 92, 94, 95, 119, 120);

INSERT INTO gpu_fatal_xids
SELECT cluster, node, uuid, time, assumeNotNull(xid)
FROM gpu_samples
WHERE xid IN (48, 63, 64, 74, 79, 92, 94, 95, 119, 120);

-- The GPUs each attempt held (from its allocated facts; '' for GPUs no source named), with the last
-- window it held each in: which GPUs' XIDs can end it.
CREATE TABLE IF NOT EXISTS attempt_gpus
(
    cluster LowCardinality(String),
    scheduler LowCardinality(String),
    job_id String,
    attempt UInt16,
    node LowCardinality(String),
    gpu_uuid String,
    last_window SimpleAggregateFunction(max, DateTime64(3, 'UTC'))
)
ENGINE = AggregatingMergeTree
-- looked up per failed attempt
ORDER BY (cluster, scheduler, job_id, attempt, node, gpu_uuid);

CREATE MATERIALIZED VIEW IF NOT EXISTS attempt_gpus_mv TO attempt_gpus AS
SELECT cluster, scheduler, job_id, attempt, node, gpu_uuid, max(window_start) AS last_window
FROM gpu_usage_facts
WHERE kind = 'allocated'
GROUP BY cluster, scheduler, job_id, attempt, node, gpu_uuid;

INSERT INTO attempt_gpus
SELECT cluster, scheduler, job_id, attempt, node, gpu_uuid, max(window_start)
FROM gpu_usage_facts
WHERE kind = 'allocated'
GROUP BY cluster, scheduler, job_id, attempt, node, gpu_uuid;

CREATE OR REPLACE VIEW attempt_outcomes AS
SELECT
    a.* EXCEPT (failure_reason),
    if(x.fatal_xid = 0, a.failure_reason, if(x.fatal_xid = 79, 'node_failure', 'gpu_error')) AS failure_reason,
    a.failure_reason AS scheduler_reason
FROM job_attempts AS a FINAL
LEFT JOIN
(
    -- a fatal XID on one of the attempt's GPUs (any GPU of its node where no source named them)
    SELECT f.cluster AS x_cluster, f.scheduler AS x_scheduler, f.job_id AS x_job_id, f.attempt AS x_attempt,
           if(countIf(g.xid = 79) > 0, 79, max(g.xid)) AS fatal_xid
    FROM
    (
        SELECT e.cluster AS cluster, e.scheduler AS scheduler, e.job_id AS job_id, e.attempt AS attempt,
               any(e.end_time) AS end_time, h.node AS node, groupArrayIf(h.gpu_uuid, h.gpu_uuid != '') AS named
        FROM
        (
            SELECT cluster, scheduler, job_id, attempt, end_time FROM job_attempts FINAL
            WHERE outcome = 'failure' AND failure_reason IN ('app_error', 'unknown', '') AND end_time IS NOT NULL
        ) AS e
        INNER JOIN attempt_gpus AS h ON h.cluster = e.cluster AND h.scheduler = e.scheduler
                                    AND h.job_id = e.job_id AND h.attempt = e.attempt
        GROUP BY cluster, scheduler, job_id, attempt, node
    ) AS f
    INNER JOIN gpu_fatal_xids AS g ON g.cluster = f.cluster AND g.node = f.node
    WHERE (empty(f.named) OR has(f.named, g.uuid))
      AND g.time >= f.end_time - toIntervalSecond(300) AND g.time <= f.end_time + toIntervalSecond(60)
    GROUP BY x_cluster, x_scheduler, x_job_id, x_attempt
) AS x ON x.x_cluster = a.cluster AND x.x_scheduler = a.scheduler AND x.x_job_id = a.job_id
      AND x.x_attempt = a.attempt;

CREATE OR REPLACE VIEW org_mapping_rows AS
SELECT cluster, kind, key, effective_from, argMax(value, ingested_at) AS value
FROM org_mappings
GROUP BY cluster, kind, key, effective_from;

ALTER TABLE gpu_usage_hourly ADD COLUMN IF NOT EXISTS org_scope LowCardinality(String) DEFAULT '*';

CREATE OR REPLACE VIEW current_hourly AS
SELECT h.*
FROM gpu_usage_hourly AS h
INNER JOIN
(
    SELECT cluster, node, hour, max(version) AS latest
    FROM gpu_usage_hourly
    WHERE kind = ''
    GROUP BY cluster, node, hour
) AS b ON h.cluster = b.cluster AND h.node = b.node AND h.hour = b.hour AND h.version = b.latest
WHERE h.kind != '';

CREATE OR REPLACE VIEW resolved_facts AS
SELECT
    t.*,
    if(bu.value != '', bu.value, 'unassigned') AS business_unit
FROM
(
    SELECT
        o.*,
        multiIf(o.team_label != '', o.team_label, ns.value != '', ns.value, acc.value != '', acc.value, 'unassigned') AS team,
        if(o.kind = 'allocated', if(a.a_outcome = '', 'running', a.a_outcome), '') AS outcome,
        if(a.a_outcome = 'failure', if(a.a_reason = '', 'unknown', a.a_reason), 'none') AS failure_reason
    FROM
    (
        SELECT
            f.* EXCEPT (one),
            if(own.own_version > toDateTime64(0, 3, 'UTC'), own.own_version, g.global_version) AS org_version,
            if(own.own_version > toDateTime64(0, 3, 'UTC'), f.cluster, '*') AS org_scope
        FROM (SELECT *, toUInt8(1) AS one FROM current_facts) AS f
        ASOF LEFT JOIN
        (
            SELECT DISTINCT cluster AS own_cluster, effective_from AS own_version FROM org_mappings WHERE cluster != '*'
        ) AS own ON f.cluster = own.own_cluster AND f.window_start >= own.own_version
        ASOF LEFT JOIN
        (
            SELECT DISTINCT toUInt8(1) AS g_one, effective_from AS global_version FROM org_mappings WHERE cluster = '*'
        ) AS g ON f.one = g.g_one AND f.window_start >= g.global_version
    ) AS o
    LEFT JOIN
    (
        SELECT cluster AS scope, key, effective_from, value FROM org_mapping_rows WHERE kind = 'namespace_team'
    ) AS ns ON ns.scope = o.org_scope AND ns.key = o.namespace AND ns.effective_from = o.org_version
    LEFT JOIN
    (
        SELECT cluster AS scope, key, effective_from, value FROM org_mapping_rows WHERE kind = 'account_team'
    ) AS acc ON acc.scope = o.org_scope AND acc.key = o.account AND acc.effective_from = o.org_version
    LEFT JOIN
    (
        SELECT cluster AS a_cluster, scheduler AS a_scheduler, job_id AS a_job_id, attempt AS a_attempt,
               outcome AS a_outcome, failure_reason AS a_reason
        FROM attempt_outcomes
    ) AS a ON a.a_cluster = o.cluster AND a.a_scheduler = o.scheduler AND a.a_job_id = o.job_id
          AND a.a_attempt = o.attempt
) AS t
LEFT JOIN
(
    SELECT cluster AS scope, key, effective_from, value FROM org_mapping_rows WHERE kind = 'team_business_unit'
) AS bu ON bu.scope = t.org_scope AND bu.key = t.team AND bu.effective_from = t.org_version;

CREATE OR REPLACE VIEW resolved_hourly AS
SELECT
    t.*,
    if(bu.value != '', bu.value, 'unassigned') AS business_unit
FROM
(
    SELECT
        h.*,
        multiIf(h.team_label != '', h.team_label, ns.value != '', ns.value, acc.value != '', acc.value, 'unassigned') AS team,
        if(h.kind = 'allocated', if(a.a_outcome = '', 'running', a.a_outcome), '') AS outcome,
        if(a.a_outcome = 'failure', if(a.a_reason = '', 'unknown', a.a_reason), 'none') AS failure_reason
    FROM current_hourly AS h
    LEFT JOIN
    (
        SELECT cluster AS scope, key, effective_from, value FROM org_mapping_rows WHERE kind = 'namespace_team'
    ) AS ns ON ns.scope = h.org_scope AND ns.key = h.namespace AND ns.effective_from = h.org_version
    LEFT JOIN
    (
        SELECT cluster AS scope, key, effective_from, value FROM org_mapping_rows WHERE kind = 'account_team'
    ) AS acc ON acc.scope = h.org_scope AND acc.key = h.account AND acc.effective_from = h.org_version
    LEFT JOIN
    (
        SELECT cluster AS a_cluster, scheduler AS a_scheduler, job_id AS a_job_id, attempt AS a_attempt,
               outcome AS a_outcome, failure_reason AS a_reason
        FROM attempt_outcomes
    ) AS a ON a.a_cluster = h.cluster AND a.a_scheduler = h.scheduler AND a.a_job_id = h.job_id
          AND a.a_attempt = h.attempt
) AS t
LEFT JOIN
(
    SELECT cluster AS scope, key, effective_from, value FROM org_mapping_rows WHERE kind = 'team_business_unit'
) AS bu ON bu.scope = t.org_scope AND bu.key = t.team AND bu.effective_from = t.org_version;

-- The failed GPU-seconds of each fact row, and the part of them lost: held after the attempt's
-- last completed checkpoint. A window that holds the checkpoint loses the part of the attempt's
-- time in it after the checkpoint (an attempt holds its GPUs evenly within a window), so lost work
-- per attempt is its record's, and never more than its failed GPU-seconds in any range.
CREATE OR REPLACE VIEW failed_facts AS
SELECT
    *,
    gpu_seconds * if(last_checkpoint IS NULL, 1.0,
                     greatest(held_hi - greatest(held_lo, checkpoint_s), 0) / greatest(held_hi - held_lo, 1e-9))
        AS lost_seconds
FROM
(
    SELECT
        f.*,
        a.last_checkpoint AS last_checkpoint,
        a.lost_gpu_seconds AS attempt_lost_gpu_seconds,
        a.gpu_seconds AS attempt_gpu_seconds,
        a.nodes AS attempt_nodes,
        a.scheduler_state AS attempt_scheduler_state,
        a.end_time AS attempt_end,
        greatest(toUnixTimestamp64Milli(f.window_start) / 1000, a.a_start) AS held_lo,
        least(toUnixTimestamp64Milli(f.window_start) / 1000 + f.window_seconds, a.a_end) AS held_hi,
        toUnixTimestamp64Milli(ifNull(a.last_checkpoint, toDateTime64(0, 3, 'UTC'))) / 1000 AS checkpoint_s
    FROM (SELECT * FROM resolved_facts WHERE kind = 'allocated' AND outcome = 'failure') AS f
    LEFT JOIN
    (
        SELECT cluster AS a_cluster, scheduler AS a_scheduler, job_id AS a_job_id, attempt AS a_attempt,
               last_checkpoint, lost_gpu_seconds, gpu_seconds, nodes, scheduler_state, end_time,
               toUnixTimestamp64Milli(ifNull(start_time, toDateTime64(0, 3, 'UTC'))) / 1000 AS a_start,
               toUnixTimestamp64Milli(ifNull(end_time, toDateTime64('2200-01-01 00:00:00', 3, 'UTC'))) / 1000 AS a_end
        FROM job_attempts FINAL
    ) AS a ON a.a_cluster = f.cluster AND a.a_scheduler = f.scheduler AND a.a_job_id = f.job_id
          AND a.a_attempt = f.attempt
);
