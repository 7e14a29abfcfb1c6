-- The owner rule in one place (docs/ATTRIBUTION.md "Owner"): `owner_resolution` says, for every
-- owner key the facts hold and every org version that can apply to its cluster, which team and
-- business unit the key has under that version and from when that version is the one in force.
-- The facts (`resolved_facts`), the hourly rollup's rebuild (sql/queries/usage_hourly_rebuild.sql,
-- which stores org_version and org_scope), the rollup's reader (`resolved_hourly`) and the report
-- (sql/queries/gpu_hours.sql) all join it; none of them writes the rule again.
--
-- An owner key is what the rule reads of a fact besides its time: cluster, namespace, Slurm
-- account and team label (the model is the attribution's, carried by the facts as it is).
-- `owner_keys` holds the distinct keys of `gpu_usage_facts`, kept by a materialized view as facts
-- are written and filled once here for the facts written before; `gpuledger replay` empties it
-- with the facts. A few hundred keys: the mappings are joined to them, not to every fact row.
CREATE TABLE IF NOT EXISTS owner_keys
(
    cluster LowCardinality(String),
    namespace LowCardinality(String),
    account LowCardinality(String),
    team_label LowCardinality(String)
)
ENGINE = ReplacingMergeTree
-- one row per key once merged; readers take DISTINCT for the copies written before a merge
ORDER BY (cluster, namespace, account, team_label);

CREATE MATERIALIZED VIEW IF NOT EXISTS owner_keys_mv TO owner_keys AS
SELECT DISTINCT cluster, namespace, account, team_label
FROM gpu_usage_facts;

INSERT INTO owner_keys
SELECT DISTINCT cluster, namespace, account, team_label
FROM gpu_usage_facts;

-- One row per (owner key, org scope, org version) that can apply to the key's cluster: each of
-- the cluster's own versions (scope: the cluster), each '*' version and the empty version before
-- any (scope '*', version 0: no mapping, so only a team label names a team). The version in force
-- for (cluster, time) is the cluster's latest own version starting at or before it, else the latest
-- '*' version starting at or before it: `in_force_from` is the time from which the row's version is
-- that one — its start, or never (year 2200) for a '*' version starting after the cluster's first
-- own one. So an ASOF join on the key and `time >= in_force_from` finds the version in force at a
-- time; an equality join on the key, org_scope and org_version finds a stored version's owner.
-- A version is a full snapshot within its scope: team from the team label, else the version's
-- namespace mapping, else its account mapping, else 'unassigned'; business unit the team's in the
-- same version, else 'unassigned'. Each version's three mappings are read as maps, one row per
-- version, so the keys meet the mappings in one join (half the time of a join per mapping kind).
CREATE OR REPLACE VIEW owner_resolution AS
SELECT
    k.cluster AS cluster, k.namespace AS namespace, k.account AS account, k.team_label AS team_label,
    v.org_scope AS org_scope, v.org_version AS org_version, v.in_force_from AS in_force_from,
    multiIf(k.team_label != '', k.team_label, m.teams[k.namespace] != '', m.teams[k.namespace],
            m.account_teams[k.account] != '', m.account_teams[k.account], 'unassigned') AS team,
    if(m.units[team] != '', m.units[team], 'unassigned') AS business_unit
FROM (SELECT DISTINCT cluster, namespace, account, team_label FROM owner_keys) AS k
INNER JOIN
(
    SELECT c.v_cluster AS v_cluster, '*' AS org_scope, g.version AS org_version,
           if(o.has_own = 1 AND g.version >= o.first_own, toDateTime64('2200-01-01 00:00:00', 3, 'UTC'), g.version)
               AS in_force_from
    FROM (SELECT DISTINCT cluster AS v_cluster FROM owner_keys) AS c
    CROSS JOIN
    (
        SELECT DISTINCT version
        FROM
        (
            SELECT toDateTime64(0, 3, 'UTC') AS version
            UNION ALL
            SELECT effective_from AS version FROM org_mappings WHERE cluster = '*'
        )
    ) AS g
    LEFT JOIN
    (
        SELECT cluster AS o_cluster, min(effective_from) AS first_own, toUInt8(1) AS has_own
        FROM org_mappings WHERE cluster != '*'
        GROUP BY cluster
    ) AS o ON o.o_cluster = c.v_cluster
    UNION ALL
    SELECT DISTINCT cluster AS v_cluster, cluster AS org_scope, effective_from AS org_version,
           effective_from AS in_force_from
    FROM org_mappings WHERE cluster != '*'
) AS v ON v.v_cluster = k.cluster
LEFT JOIN
(
    SELECT cluster AS m_scope, effective_from AS m_version,
           mapFromArrays(groupArrayIf(key, kind = 'namespace_team'), groupArrayIf(value, kind = 'namespace_team')) AS teams,
           mapFromArrays(groupArrayIf(key, kind = 'account_team'), groupArrayIf(value, kind = 'account_team')) AS account_teams,
           mapFromArrays(groupArrayIf(key, kind = 'team_business_unit'), groupArrayIf(value, kind = 'team_business_unit')) AS units
    FROM org_mapping_rows
    GROUP BY cluster, effective_from
) AS m ON m.m_scope = v.org_scope AND m.m_version = v.org_version;

-- The facts with their owner: the org version in force at each window's start (ASOF on
-- `in_force_from`) and its team and business unit, and the attempt's outcome.
CREATE OR REPLACE VIEW resolved_facts AS
SELECT
    f.*,
    r.org_version AS org_version,
    r.org_scope AS org_scope,
    r.team AS team,
    if(f.kind = 'allocated', if(a.a_outcome = '', 'running', a.a_outcome), '') AS outcome,
    if(a.a_outcome = 'failure', if(a.a_reason = '', 'unknown', a.a_reason), 'none') AS failure_reason,
    r.business_unit AS business_unit
FROM current_facts AS f
ASOF LEFT JOIN
(
    SELECT cluster AS r_cluster, namespace AS r_namespace, account AS r_account, team_label AS r_team_label,
           in_force_from, org_version, org_scope, team, business_unit
    FROM owner_resolution
) AS r ON r.r_cluster = f.cluster AND r.r_namespace = f.namespace AND r.r_account = f.account
      AND r.r_team_label = f.team_label AND f.window_start >= r.in_force_from
LEFT JOIN
(
    SELECT cluster AS a_cluster, scheduler AS a_scheduler, job_id AS a_job_id, attempt AS a_attempt,
           outcome AS a_outcome, failure_reason AS a_reason
    FROM attempt_outcomes
) AS a ON a.a_cluster = f.cluster AND a.a_scheduler = f.scheduler AND a.a_job_id = f.job_id
      AND a.a_attempt = f.attempt;

-- The rollup's rows with their owner under the org version each row stored when it was built.
CREATE OR REPLACE VIEW resolved_hourly AS
SELECT
    h.*,
    r.team AS team,
    if(h.kind = 'allocated', if(a.a_outcome = '', 'running', a.a_outcome), '') AS outcome,
    if(a.a_outcome = 'failure', if(a.a_reason = '', 'unknown', a.a_reason), 'none') AS failure_reason,
    r.business_unit AS business_unit
FROM current_hourly AS h
LEFT JOIN
(
    SELECT cluster AS r_cluster, namespace AS r_namespace, account AS r_account, team_label AS r_team_label,
           org_scope AS r_scope, org_version AS r_version, team, business_unit
    FROM owner_resolution
) AS r ON r.r_cluster = h.cluster AND r.r_namespace = h.namespace AND r.r_account = h.account
      AND r.r_team_label = h.team_label AND r.r_scope = h.org_scope AND r.r_version = h.org_version
LEFT JOIN
(
    SELECT cluster AS a_cluster, scheduler AS a_scheduler, job_id AS a_job_id, attempt AS a_attempt,
           outcome AS a_outcome, failure_reason AS a_reason
    FROM attempt_outcomes
) AS a ON a.a_cluster = h.cluster AND a.a_scheduler = h.scheduler AND a.a_job_id = h.job_id
      AND a.a_attempt = h.attempt;
