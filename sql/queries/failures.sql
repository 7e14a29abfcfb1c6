-- Which failures burned the most GPU-hours in [start, end): failed attempts' GPU-hours by reason,
-- team, model, job and attempt, with the work lost after the last checkpoint and the nodes.
SELECT
    f.failure_reason AS failure_reason,
    f.team AS team,
    f.model AS model,
    f.logical_job AS job,
    f.attempt AS attempt,
    sum(f.gpu_seconds) / 3600 AS failed_gpu_hours,
    any(a.lost_gpu_seconds) / 3600 AS lost_gpu_hours,
    any(a.nodes) AS nodes,
    any(a.scheduler_state) AS scheduler_state,
    any(a.end_time) AS ended
FROM resolved_facts AS f
LEFT JOIN
(
    SELECT cluster AS a_cluster, scheduler AS a_scheduler, job_id AS a_job_id, attempt AS a_attempt,
           lost_gpu_seconds, nodes, scheduler_state, end_time
    FROM job_attempts FINAL
) AS a ON a.a_cluster = f.cluster AND a.a_scheduler = f.scheduler AND a.a_job_id = f.job_id AND a.a_attempt = f.attempt
WHERE f.window_start >= {start:DateTime64(3, 'UTC')} AND f.window_start < {end:DateTime64(3, 'UTC')}
  AND ({cluster:String} = '' OR f.cluster = {cluster:String})
  AND f.kind = 'allocated' AND f.outcome = 'failure'
GROUP BY failure_reason, team, model, job, attempt
ORDER BY failed_gpu_hours DESC, job, attempt
LIMIT {limit:UInt32}
