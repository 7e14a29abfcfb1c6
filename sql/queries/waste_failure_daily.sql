-- Failed attempts' GPU-seconds in [start, end) by reason, team, model and job, and the lost part:
-- the windows at or after the attempt's last completed checkpoint (all of them without one).
SELECT
    toDate({start:DateTime64(3, 'UTC')}) AS day,
    f.cluster AS cluster_, f.failure_reason AS failure_reason_, f.team AS team_, f.business_unit AS business_unit_,
    f.model AS model_, f.gpu_model AS gpu_model_, f.scheduler AS scheduler_, f.logical_job AS logical_job_,
    f.job_id AS job_id_, f.attempt AS attempt_,
    any(a.last_checkpoint) AS last_checkpoint_,
    sum(f.gpu_seconds) AS failed_gpu_seconds,
    sumIf(f.gpu_seconds, a.last_checkpoint IS NULL OR f.window_start >= a.last_checkpoint) AS lost_gpu_seconds
FROM resolved_facts AS f
LEFT JOIN
(
    SELECT cluster AS a_cluster, scheduler AS a_scheduler, job_id AS a_job_id, attempt AS a_attempt, last_checkpoint
    FROM job_attempts FINAL
) AS a ON a.a_cluster = f.cluster AND a.a_scheduler = f.scheduler AND a.a_job_id = f.job_id AND a.a_attempt = f.attempt
WHERE f.window_start >= {start:DateTime64(3, 'UTC')} AND f.window_start < {end:DateTime64(3, 'UTC')}
  AND f.kind = 'allocated' AND f.outcome = 'failure'
GROUP BY cluster_, failure_reason_, team_, business_unit_, model_, gpu_model_, scheduler_, logical_job_, job_id_, attempt_
