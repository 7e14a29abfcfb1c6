-- GPU-seconds of [start, end) per UTC day, cluster, GPU model, rate segment, kind and owner, for
-- pricing. The owner is the values of the dimensions {by} (the daily cost assets pass
-- 'business_unit,team,model'; a report adds its own grouping), mapped exactly as gpu_hours.sql maps
-- them; capacity rows (unallocated, unavailable) have no owner. A window's segment is the latest
-- price boundary at or before its start ({bounds}: every rate version's effective_from;
-- 1970-01-01 when none applies yet). lost_seconds: failed attempts' GPU-seconds held after their
-- last completed checkpoint (the work a retry redoes), as failed_facts computes them (the
-- checkpoint's own window counts its part after the checkpoint). energy_joules: the energy of
-- those GPU-seconds. {cluster}: one cluster, or '' for all.
WITH
    splitByChar(',', {by:String}) AS dims,
    -- `label:<key>` dimensions: every attempt's pod labels as gpu_hours.sql reads them (a constant,
    -- read only when a dimension is a label)
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
SELECT g.day AS day, g.cluster AS cluster, g.gpu_model AS gpu_model, g.segment_start AS segment_start,
       g.kind AS kind, g.owner AS owner, g.gpu_seconds AS gpu_seconds, g.busy_seconds AS busy_seconds,
       g.unobserved_seconds AS unobserved_seconds, ifNull(l.lost, 0.0) AS lost_seconds,
       g.energy_joules AS energy_joules
FROM
(
    SELECT
        toStartOfDay(window_start) AS day, cluster, gpu_model,
        arrayMax(arrayFilter(b -> b <= window_start,
                             arrayPushFront({bounds:Array(DateTime64(3, 'UTC'))}, toDateTime64(0, 3, 'UTC')))) AS segment_start,
        kind,
        if(kind = 'allocated',
           arrayMap(d -> multiIf(d = 'team', team, d = 'business_unit', business_unit, d = 'namespace', namespace,
                                 d = 'account', account, d = 'model', model, d = 'job', logical_job,
                                 d = 'node', toString(node), d = 'gpu_model', toString(gpu_model),
                                 d = 'failure_reason', failure_reason, d = 'cluster', toString(cluster),
                                 d = 'user', user, d = 'queue', queue, d = 'workload_kind', workload_kind,
                                 startsWith(d, 'label:'),
                                 if(pod_labels[concat(cluster, '\x1F', scheduler, '\x1F', job_id, '\x1F', toString(attempt), '\x1F',
                                                     substring(d, 7))] = '', '__unlabelled__',
                                    pod_labels[concat(cluster, '\x1F', scheduler, '\x1F', job_id, '\x1F', toString(attempt), '\x1F',
                                                     substring(d, 7))]),
                                 'all'),
                    dims),
           []) AS owner,
        sum(gpu_seconds) AS gpu_seconds,
        sum(busy_seconds) AS busy_seconds,
        sum(unobserved_seconds) AS unobserved_seconds,
        sum(energy_joules) AS energy_joules
    FROM resolved_facts
    WHERE window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
      AND ({cluster:String} = '' OR cluster = {cluster:String})
    GROUP BY day, cluster, gpu_model, segment_start, kind, owner
) AS g
LEFT JOIN
(
    SELECT
        toStartOfDay(window_start) AS l_day, cluster AS l_cluster, gpu_model AS l_gpu_model,
        arrayMax(arrayFilter(b -> b <= window_start,
                             arrayPushFront({bounds:Array(DateTime64(3, 'UTC'))}, toDateTime64(0, 3, 'UTC')))) AS l_segment,
        arrayMap(d -> multiIf(d = 'team', team, d = 'business_unit', business_unit, d = 'namespace', namespace,
                              d = 'account', account, d = 'model', model, d = 'job', logical_job,
                              d = 'node', toString(node), d = 'gpu_model', toString(gpu_model),
                              d = 'failure_reason', failure_reason, d = 'cluster', toString(cluster),
                              d = 'user', user, d = 'queue', queue, d = 'workload_kind', workload_kind,
                                 startsWith(d, 'label:'),
                                 if(pod_labels[concat(cluster, '\x1F', scheduler, '\x1F', job_id, '\x1F', toString(attempt), '\x1F',
                                                     substring(d, 7))] = '', '__unlabelled__',
                                    pod_labels[concat(cluster, '\x1F', scheduler, '\x1F', job_id, '\x1F', toString(attempt), '\x1F',
                                                     substring(d, 7))]),
                                 'all'),
                 dims) AS l_owner,
        sum(lost_seconds) AS lost
    FROM failed_facts
    WHERE window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
      AND ({cluster:String} = '' OR cluster = {cluster:String})
    GROUP BY l_day, l_cluster, l_gpu_model, l_segment, l_owner
) AS l ON g.kind = 'allocated' AND l.l_day = g.day AND l.l_cluster = g.cluster AND l.l_gpu_model = g.gpu_model
      AND l.l_segment = g.segment_start AND l.l_owner = g.owner
ORDER BY day, cluster, gpu_model, segment_start, kind, owner
