-- Hourly rollup of the current facts, so month-long reports read about one row per node, hour and
-- owner instead of one per GPU and minute. Written only by streams/rollup.py (`rebuild_hours`,
-- `rebuild_since`); a report over [start, end) reads the full hours here and the partial hours at
-- the range's edges from `resolved_facts` (sql/queries/gpu_hours.sql).
--
-- One rebuild of a (cluster, node, hour) writes all of that hour's rows with one shared `version`,
-- plus one marker row (kind = '', all sums 0), so that even a rebuild that finds no facts supersedes
-- an older one. Readers keep only the latest version of each (cluster, node, hour): owner rows an
-- older rebuild had and a newer one no longer has are not counted.
--
-- `org_version` is the org mapping version in force at each window's start (ASOF, as in
-- `resolved_facts`), fixed when the hour is built: an org version starting mid-hour splits the
-- hour's rows exactly where the facts-level answer splits. Team and business unit are resolved at
-- read time from it, so changed mapping values of an existing version need no rebuild; a new
-- version (even a retroactive one) needs `rebuild_since`.
CREATE TABLE IF NOT EXISTS gpu_usage_hourly
(
    cluster LowCardinality(String),
    hour DateTime('UTC'),
    node LowCardinality(String),
    version UInt64,
    org_version DateTime64(3, 'UTC'),
    gpu_model LowCardinality(String),
    -- allocated | unallocated | unavailable; '' is the rebuild marker
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
    unobserved_seconds Float64
)
-- the rebuild written last wins when merges meet the same row (same hour, node and owner) from
-- several rebuilds; rows only an older rebuild had are excluded by the readers' version join
ENGINE = ReplacingMergeTree(version)
-- monthly partitions, as for the facts: chargeback reads a month; a rebuild touches few partitions
PARTITION BY toYYYYMM(hour)
-- a short primary index: reports select a time range of one cluster, the version join groups by
-- (cluster, node, hour)
PRIMARY KEY (cluster, hour, node)
-- every grouping column of a rebuild, so that distinct owner rows of one hour never collapse
ORDER BY (cluster, hour, node, kind, org_version, gpu_model, scheduler, job_id, attempt, logical_job,
          namespace, account, user, queue, workload_kind, team_label, model);

-- The latest rebuild of each (cluster, node, hour), without its marker rows.
CREATE VIEW IF NOT EXISTS current_hourly AS
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

-- Hourly rows with team and business unit resolved through their org version (equality: the
-- ASOF step was taken when the hour was built) and the attempt outcome joined as in resolved_facts.
CREATE VIEW IF NOT EXISTS resolved_hourly AS
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
        SELECT key, effective_from, value FROM org_mapping_rows WHERE kind = 'namespace_team'
    ) AS ns ON ns.key = h.namespace AND ns.effective_from = h.org_version
    LEFT JOIN
    (
        SELECT key, effective_from, value FROM org_mapping_rows WHERE kind = 'account_team'
    ) AS acc ON acc.key = h.account AND acc.effective_from = h.org_version
    LEFT JOIN
    (
        SELECT cluster AS a_cluster, scheduler AS a_scheduler, job_id AS a_job_id, attempt AS a_attempt,
               outcome AS a_outcome, failure_reason AS a_reason
        FROM job_attempts FINAL
    ) AS a ON a.a_cluster = h.cluster AND a.a_scheduler = h.scheduler AND a.a_job_id = h.job_id
          AND a.a_attempt = h.attempt
) AS t
LEFT JOIN
(
    SELECT key, effective_from, value FROM org_mapping_rows WHERE kind = 'team_business_unit'
) AS bu ON bu.key = t.team AND bu.effective_from = t.org_version;
