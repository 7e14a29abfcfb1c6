-- Storage bytes read + written in [start, end) per UTC day, cluster and owner, from counter
-- samples that name a job. Each series (node, filesystem, device, job) is differenced in time order
-- against its previous sample (looked up to a day back); a counter that went down was reset and
-- counts from zero. The job's owner (the values of the dimensions {by}, as in
-- cost_usage_segments.sql) is the owner of most of its allocated GPU-seconds that day.
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
SELECT
    d.day AS day,
    d.cluster AS cluster,
    o.owner AS owner,
    sum(d.moved) AS bytes
FROM
(
    SELECT toStartOfDay(time) AS day, cluster, job_id, if(v >= prev, v - prev, v) AS moved
    FROM
    (
        SELECT cluster, job_id, time, v,
               lagInFrame(toNullable(v), 1, NULL) OVER (PARTITION BY cluster, node, fs_type, device, job_id ORDER BY time
                                                        ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS prev
        FROM
        (
            SELECT cluster, node, fs_type, device, job_id, time, read_bytes + write_bytes AS v
            FROM storage_samples FINAL
            WHERE job_id != '' AND time >= {start:DateTime64(3, 'UTC')} - INTERVAL 1 DAY
              AND time < {end:DateTime64(3, 'UTC')}
              AND ({cluster:String} = '' OR cluster = {cluster:String})
        )
    )
    WHERE time >= {start:DateTime64(3, 'UTC')} AND prev IS NOT NULL
) AS d
INNER JOIN
(
    SELECT toStartOfDay(window_start) AS o_day, cluster, job_id,
           argMax(arrayMap(d -> multiIf(d = 'team', team, d = 'business_unit', business_unit,
                                        d = 'namespace', namespace, d = 'account', account, d = 'model', model,
                                        d = 'job', logical_job, d = 'node', toString(node),
                                        d = 'gpu_model', toString(gpu_model), d = 'failure_reason', failure_reason,
                                        d = 'cluster', toString(cluster), d = 'user', user, d = 'queue', queue,
                                        d = 'workload_kind', workload_kind,
                                        startsWith(d, 'label:'),
                                 if(pod_labels[concat(cluster, '\x1F', scheduler, '\x1F', job_id, '\x1F', toString(attempt), '\x1F',
                                                     substring(d, 7))] = '', '__unlabelled__',
                                    pod_labels[concat(cluster, '\x1F', scheduler, '\x1F', job_id, '\x1F', toString(attempt), '\x1F',
                                                     substring(d, 7))]),
                                        'all'), dims),
                  gpu_seconds) AS owner
    FROM resolved_facts
    WHERE window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
      AND kind = 'allocated' AND ({cluster:String} = '' OR cluster = {cluster:String})
    GROUP BY o_day, cluster, job_id
) AS o ON o.o_day = d.day AND o.cluster = d.cluster AND o.job_id = d.job_id
GROUP BY day, cluster, owner
ORDER BY day, cluster, owner
