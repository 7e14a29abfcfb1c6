-- Which failures burned the most GPU-hours in [start, end): failed attempts' GPU-hours by reason,
-- business unit, team, model, job and attempt, with the work lost after the last checkpoint
-- (within the range, as the failed hours are: never more than them) and the nodes.
SELECT
    failure_reason,
    business_unit,
    team,
    model,
    logical_job AS job,
    attempt,
    sum(gpu_seconds) / 3600 AS failed_gpu_hours,
    sum(lost_seconds) / 3600 AS lost_gpu_hours,
    any(attempt_nodes) AS nodes,
    any(attempt_scheduler_state) AS scheduler_state,
    any(attempt_end) AS ended
FROM failed_facts
WHERE window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
  AND ({cluster:String} = '' OR cluster = {cluster:String})
GROUP BY failure_reason, business_unit, team, model, job, attempt
ORDER BY failed_gpu_hours DESC, job, attempt
LIMIT {limit:UInt32}
