-- GPU-hours per owner group for [start, end): allocated, busy, failed (attempts that did not
-- succeed), unobserved; unallocated and unavailable capacity as the rows __unallocated__ and
-- __unavailable__ (busy_gpu_hours on __unallocated__: busy time of GPUs nobody held). The group
-- is chosen by {by}, a parameter, never spliced into the text.
-- The whole hours inside the range come from the hourly rollup (current_hourly, its owners taken
-- from owner_resolution as resolved_hourly takes them); only the partial hours at its edges,
-- [start, first whole hour) and [last whole hour's end, end), are read window by window from
-- resolved_facts. The answer equals gpu_hours_facts.sql, which reads every window. A dimension `label:<key>` is the attempt's pod label
-- <key> (`__unlabelled__` without it).
WITH
    -- one or several dimensions: {by} is 'team' or 'team,model'; a key joins their values with \x1F
    splitByChar(',', {by:String}) AS dims,
    {start:DateTime64(3, 'UTC')} AS range_start,
    {end:DateTime64(3, 'UTC')} AS range_end,
    -- whole hours [full_start, full_end); empty when the range lies within one or two partial hours
    toDateTime64(if(toStartOfHour(range_start) = range_start, toStartOfHour(range_start),
                    toStartOfHour(range_start) + toIntervalHour(1)), 3, 'UTC') AS full_start,
    toDateTime64(toStartOfHour(range_end), 3, 'UTC') AS full_end,
    -- `label:<key>` dimensions: every attempt's pod labels as its latest allocation event carried
    -- them (the raw payload's owner.labels), keyed cluster \x1F scheduler \x1F job \x1F attempt \x1F label;
    -- a constant, read only when a dimension is a label (no join: the other groupings run as before)
    (
        SELECT CAST((groupArray(k), groupArray(v)), 'Map(String, String)')
        FROM
        (
            SELECT concat(cluster, '\x1F', scheduler, '\x1F', job_id, '\x1F', toString(attempt), '\x1F', kv.1) AS k,
                   kv.2 AS v
            FROM
            (
                SELECT cluster, scheduler, job_id, attempt,
                       argMax(JSONExtractKeysAndValues(payload, 'owner', 'labels', 'String'), time) AS kvs
                FROM raw_scheduler_allocations
                WHERE arrayExists(d -> startsWith(d, 'label:'), splitByChar(',', {by:String}))
                GROUP BY cluster, scheduler, job_id, attempt
            )
            ARRAY JOIN kvs AS kv
        )
    ) AS pod_labels
SELECT
    arrayStringConcat(
        if(kind = 'allocated',
           arrayMap(d -> multiIf(d = 'team', team,
                        d = 'business_unit', business_unit,
                        d = 'namespace', namespace,
                        d = 'account', account,
                        d = 'model', model,
                        d = 'job', logical_job,
                        d = 'node', toString(node),
                        d = 'gpu_model', toString(gpu_model),
                        d = 'failure_reason', failure_reason,
                        d = 'cluster', toString(cluster),
                        d = 'user', user,
                        d = 'queue', queue,
                        d = 'workload_kind', workload_kind,
                        startsWith(d, 'label:'),
                        if(pod_labels[concat(cluster, '\x1F', scheduler, '\x1F', job_id, '\x1F', toString(attempt),
                                             '\x1F', substring(d, 7))] = '', '__unlabelled__',
                           pod_labels[concat(cluster, '\x1F', scheduler, '\x1F', job_id, '\x1F', toString(attempt),
                                             '\x1F', substring(d, 7))]),
                        'all'), dims),
           [concat('__', kind, '__')]),
        '\x1F') AS key,
    sumIf(gpu_seconds, kind = 'allocated') / 3600 AS allocated_gpu_hours,
    sum(busy_seconds) / 3600 AS busy_gpu_hours,
    sumIf(gpu_seconds, kind = 'allocated' AND outcome = 'failure') / 3600 AS failed_gpu_hours,
    sum(unobserved_seconds) / 3600 AS unobserved_gpu_hours,
    (sumIf(gpu_seconds, kind = 'allocated') - sumIf(busy_seconds, kind = 'allocated')
        - sumIf(unobserved_seconds, kind = 'allocated')) / 3600 AS idle_gpu_hours,
    sum(energy_joules) / 3600000 AS energy_kwh,
    sum(gpu_seconds) / 3600 AS gpu_hours
FROM
(
    -- whole hours: the current hourly rows summed over hours (and nodes, unless grouping by node)
    -- first, then their owner (owner_resolution, under each row's stored org version) and attempt
    -- outcome joined as resolved_hourly joins them; the same answer as reading resolved_hourly row by
    -- row, with the joins run on far fewer rows
    SELECT g.cluster, g.node, g.gpu_model, g.kind, r.team AS team, r.business_unit AS business_unit,
           g.namespace, g.account, g.model, g.logical_job,
           if(a.a_outcome = 'failure', if(a.a_reason = '', 'unknown', a.a_reason), 'none') AS failure_reason,
           g.user, g.queue, g.workload_kind,
           if(g.kind = 'allocated', if(a.a_outcome = '', 'running', a.a_outcome), '') AS outcome,
           g.scheduler, g.job_id, g.attempt, g.gpu_seconds, g.busy_seconds, g.unobserved_seconds, g.energy_joules
    FROM
    (
        SELECT cluster, if(has(dims, 'node'), toString(node), '') AS node, org_version, org_scope,
               if(has(dims, 'gpu_model'), toString(gpu_model), '') AS gpu_model, kind, scheduler, job_id,
               if(has(dims, 'job'), logical_job, '') AS logical_job, attempt, namespace, account,
               if(has(dims, 'user'), toString(user), '') AS user,
               if(has(dims, 'queue'), toString(queue), '') AS queue,
               if(has(dims, 'workload_kind'), toString(workload_kind), '') AS workload_kind, team_label,
               if(has(dims, 'model'), toString(model), '') AS model,
               sum(gpu_seconds) AS gpu_seconds, sum(busy_seconds) AS busy_seconds,
               sum(unobserved_seconds) AS unobserved_seconds, sum(energy_joules) AS energy_joules
        FROM current_hourly
        WHERE hour >= full_start AND hour < full_end
          AND ({cluster:String} = '' OR cluster = {cluster:String})
        GROUP BY cluster, node, org_version, org_scope, gpu_model, kind, scheduler, job_id, logical_job, attempt, namespace,
                 account, user, queue, workload_kind, team_label, model
    ) AS g
    LEFT JOIN
    (
        SELECT cluster AS r_cluster, namespace AS r_namespace, account AS r_account, team_label AS r_team_label,
               org_scope AS r_scope, org_version AS r_version, team, business_unit
        FROM owner_resolution
    ) AS r ON r.r_cluster = g.cluster AND r.r_namespace = g.namespace AND r.r_account = g.account
          AND r.r_team_label = g.team_label AND r.r_scope = g.org_scope AND r.r_version = g.org_version
    LEFT JOIN
    (
        SELECT cluster AS a_cluster, scheduler AS a_scheduler, job_id AS a_job_id, attempt AS a_attempt,
               outcome AS a_outcome, failure_reason AS a_reason
        FROM attempt_outcomes
    ) AS a ON a.a_cluster = g.cluster AND a.a_scheduler = g.scheduler AND a.a_job_id = g.job_id
          AND a.a_attempt = g.attempt
    UNION ALL
    SELECT cluster, node, gpu_model, kind, team, business_unit, namespace, account, model, logical_job,
           failure_reason, user, queue, workload_kind, outcome, scheduler, job_id, attempt, gpu_seconds,
           busy_seconds, unobserved_seconds, energy_joules
    FROM resolved_facts
    WHERE ((window_start >= range_start AND window_start < least(full_start, range_end))
           OR (window_start >= greatest(full_end, full_start) AND window_start < range_end))
      AND ({cluster:String} = '' OR cluster = {cluster:String})
)
GROUP BY key
ORDER BY startsWith(key, '__'), gpu_hours DESC, key
