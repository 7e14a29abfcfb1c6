-- Storage bytes read + written in [start, end) per owner, from counter samples that name a job.
-- Each series (node, filesystem, device, job) is differenced in time order against its previous
-- sample (looked up to a day back); a counter that went down was reset and counts from zero.
-- The job's owner is the owner of most of its allocated GPU-seconds that day.
SELECT
    d.cluster AS cluster,
    o.owner.1 AS business_unit,
    o.owner.2 AS team,
    o.owner.3 AS model,
    sum(d.moved) AS bytes
FROM
(
    SELECT cluster, job_id, if(v >= prev, v - prev, v) AS moved
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
        )
    )
    WHERE time >= {start:DateTime64(3, 'UTC')} AND prev IS NOT NULL
) AS d
INNER JOIN
(
    SELECT cluster, job_id, argMax((business_unit, team, model), gpu_seconds) AS owner
    FROM resolved_facts
    WHERE window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
      AND kind = 'allocated'
    GROUP BY cluster, job_id
) AS o ON o.cluster = d.cluster AND o.job_id = d.job_id
GROUP BY cluster, business_unit, team, model
ORDER BY cluster, business_unit, team, model
