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
        FROM job_attempts FINAL
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
        FROM job_attempts FINAL
    ) AS a ON a.a_cluster = h.cluster AND a.a_scheduler = h.scheduler AND a.a_job_id = h.job_id
          AND a.a_attempt = h.attempt
) AS t
LEFT JOIN
(
    SELECT cluster AS scope, key, effective_from, value FROM org_mapping_rows WHERE kind = 'team_business_unit'
) AS bu ON bu.scope = t.org_scope AND bu.key = t.team AND bu.effective_from = t.org_version;
