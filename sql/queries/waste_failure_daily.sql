-- Failed attempts' GPU-seconds in [start, end) by reason, team, model and job, and the lost part:
-- held after the attempt's last completed checkpoint (failed_facts: the checkpoint's own window
-- loses its part after the checkpoint; all of it without one).
SELECT
    toDate({start:DateTime64(3, 'UTC')}) AS day,
    cluster AS cluster_, failure_reason AS failure_reason_, team AS team_, business_unit AS business_unit_,
    model AS model_, gpu_model AS gpu_model_, scheduler AS scheduler_, logical_job AS logical_job_,
    job_id AS job_id_, attempt AS attempt_,
    any(last_checkpoint) AS last_checkpoint_,
    sum(gpu_seconds) AS failed_gpu_seconds,
    sum(lost_seconds) AS lost_gpu_seconds
FROM failed_facts
WHERE window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
GROUP BY cluster_, failure_reason_, team_, business_unit_, model_, gpu_model_, scheduler_, logical_job_, job_id_, attempt_
