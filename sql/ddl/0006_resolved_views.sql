-- Read-side views. Facts are resolved to teams and business units at query time through the
-- effective-dated org mappings, so a reorg (a new mapping version) needs no replay of history:
-- each window uses the org version in force at its start. A version is a full snapshot: a key
-- missing from the version in force is unmapped ("unassigned"), even if an older version had it.

-- The current facts: the latest write of each (cluster, node, window) and nothing older.
CREATE VIEW IF NOT EXISTS current_facts AS
SELECT f.*
FROM gpu_usage_facts AS f FINAL
INNER JOIN
(
    SELECT cluster, node, window_start, max(version) AS latest
    FROM fact_windows
    GROUP BY cluster, node, window_start
) AS w ON f.cluster = w.cluster AND f.node = w.node AND f.window_start = w.window_start AND f.version = w.latest;

-- The latest event of each org mapping row (re-ingests collapse).
CREATE VIEW IF NOT EXISTS org_mapping_rows AS
SELECT kind, key, effective_from, argMax(value, ingested_at) AS value
FROM org_mappings
GROUP BY kind, key, effective_from;

-- Facts with owner dimensions resolved (team, business_unit) and their attempt's outcome.
CREATE VIEW IF NOT EXISTS resolved_facts AS
SELECT
    t.*,
    if(bu.value != '', bu.value, 'unassigned') AS business_unit
FROM
(
    SELECT
        f.* EXCEPT (one),
        v.org_version AS org_version,
        multiIf(f.team_label != '', f.team_label, ns.value != '', ns.value, acc.value != '', acc.value, 'unassigned') AS team,
        if(f.kind = 'allocated', if(a.a_outcome = '', 'running', a.a_outcome), '') AS outcome,
        if(a.a_outcome = 'failure', if(a.a_reason = '', 'unknown', a.a_reason), 'none') AS failure_reason
    FROM (SELECT *, toUInt8(1) AS one FROM current_facts) AS f
    ASOF LEFT JOIN
    (
        SELECT DISTINCT toUInt8(1) AS one, effective_from AS org_version FROM org_mappings
    ) AS v ON f.one = v.one AND f.window_start >= v.org_version
    LEFT JOIN
    (
        SELECT key, effective_from, value FROM org_mapping_rows WHERE kind = 'namespace_team'
    ) AS ns ON ns.key = f.namespace AND ns.effective_from = v.org_version
    LEFT JOIN
    (
        SELECT key, effective_from, value FROM org_mapping_rows WHERE kind = 'account_team'
    ) AS acc ON acc.key = f.account AND acc.effective_from = v.org_version
    LEFT JOIN
    (
        SELECT cluster AS a_cluster, scheduler AS a_scheduler, job_id AS a_job_id, attempt AS a_attempt,
               outcome AS a_outcome, failure_reason AS a_reason
        FROM job_attempts FINAL
    ) AS a ON a.a_cluster = f.cluster AND a.a_scheduler = f.scheduler AND a.a_job_id = f.job_id
          AND a.a_attempt = f.attempt
) AS t
LEFT JOIN
(
    SELECT key, effective_from, value FROM org_mapping_rows WHERE kind = 'team_business_unit'
) AS bu ON bu.key = t.team AND bu.effective_from = t.org_version;
