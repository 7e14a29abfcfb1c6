-- Rebuild the hourly rollup for the hours [{hour_start}, {hour_end}) (whole hours) of one cluster
-- ({cluster}; '' with {all_nodes} = true: every cluster) and the nodes {nodes} (or every node with
-- {all_nodes}). Reads the base tables with the filters inside each subquery: the current facts are
-- the rows of the latest version of each (cluster, node, window) in fact_windows, deduplicated by
-- FINAL, summed per hour, org version and scope (the version in force at each window's start, from
-- org_versions_in_force, the view owner_resolution takes it from) and owner. Every (cluster, node, hour) that has
-- windows also gets one marker row (kind = ''), so a rebuild that finds no facts still supersedes an
-- older one. All rows carry {version}.
INSERT INTO gpu_usage_hourly (cluster, hour, node, version, org_version, org_scope, gpu_model, kind, scheduler,
                              job_id, logical_job, attempt, namespace, account, user, queue, workload_kind,
                              team_label, model, gpu_seconds, busy_seconds, unobserved_seconds, energy_joules)
SELECT
    f.cluster, toStartOfHour(f.window_start) AS hour, f.node, {version:UInt64} AS version,
    r.org_version AS org_version, r.org_scope AS org_scope,
    f.gpu_model, f.kind, f.scheduler, f.job_id, f.logical_job, f.attempt, f.namespace, f.account, f.user, f.queue,
    f.workload_kind, f.team_label, f.model,
    sum(f.gpu_seconds), sum(f.busy_seconds), sum(f.unobserved_seconds), sum(f.energy_joules)
FROM
(
    SELECT c.*
    FROM gpu_usage_facts AS c FINAL
    INNER JOIN
    (
        SELECT cluster, node, window_start, max(version) AS latest
        FROM fact_windows
        WHERE ({cluster:String} = '' OR cluster = {cluster:String})
          AND ({all_nodes:Bool} OR node IN {nodes:Array(String)})
          AND window_start >= {hour_start:DateTime64(3, 'UTC')} AND window_start < {hour_end:DateTime64(3, 'UTC')}
        GROUP BY cluster, node, window_start
    ) AS w ON c.cluster = w.cluster AND c.node = w.node AND c.window_start = w.window_start AND c.version = w.latest
    WHERE ({cluster:String} = '' OR c.cluster = {cluster:String})
      AND ({all_nodes:Bool} OR c.node IN {nodes:Array(String)})
      AND c.window_start >= {hour_start:DateTime64(3, 'UTC')} AND c.window_start < {hour_end:DateTime64(3, 'UTC')}
) AS f
ASOF LEFT JOIN
(
    SELECT cluster AS r_cluster, in_force_from, org_version, org_scope
    FROM org_versions_in_force
    WHERE ({cluster:String} = '' OR cluster = {cluster:String})
) AS r ON r.r_cluster = f.cluster AND f.window_start >= r.in_force_from
GROUP BY f.cluster, hour, f.node, org_version, org_scope, f.gpu_model, f.kind, f.scheduler, f.job_id, f.logical_job,
         f.attempt, f.namespace, f.account, f.user, f.queue, f.workload_kind, f.team_label, f.model
UNION ALL
SELECT
    cluster, toStartOfHour(window_start) AS hour, node, {version:UInt64} AS version,
    toDateTime64(0, 3, 'UTC') AS org_version, '*' AS org_scope, '' AS gpu_model, '' AS kind, '' AS scheduler, '' AS job_id,
    '' AS logical_job, toUInt16(0) AS attempt, '' AS namespace, '' AS account, '' AS user, '' AS queue,
    '' AS workload_kind, '' AS team_label, '' AS model, 0.0 AS gpu_seconds, 0.0 AS busy_seconds,
    0.0 AS unobserved_seconds, 0.0 AS energy_joules
FROM fact_windows
WHERE ({cluster:String} = '' OR cluster = {cluster:String})
  AND ({all_nodes:Bool} OR node IN {nodes:Array(String)})
  AND window_start >= {hour_start:DateTime64(3, 'UTC')} AND window_start < {hour_end:DateTime64(3, 'UTC')}
GROUP BY cluster, node, hour
