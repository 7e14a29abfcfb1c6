-- Energy in the hourly rollup (docs/ATTRIBUTION.md "Energy"): the facts carry each row's joules
-- since the attribution splits every GPU's energy as it splits its capacity; the rollup sums them
-- like the GPU-seconds. Facts and hours written before energy was attributed read 0 until
-- `gpuledger replay` rebuilds them. A view's columns are fixed when it is created: the two
-- views over the rollup are created again, unchanged, to show the new column.
ALTER TABLE gpu_usage_hourly ADD COLUMN IF NOT EXISTS energy_joules Float64 DEFAULT 0 AFTER unobserved_seconds;

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
