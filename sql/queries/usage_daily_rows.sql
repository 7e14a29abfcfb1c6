-- GPU-seconds of [start, end) per cluster, GPU model, kind and every owner dimension, for one day.
-- Owner dimensions are blank on unallocated / unavailable rows (nobody owns them).
SELECT
    toDate({start:DateTime64(3, 'UTC')}) AS day,
    cluster, gpu_model, kind, scheduler, namespace, account, user, queue, workload_kind,
    if(kind = 'allocated', team, '') AS team_,
    if(kind = 'allocated', business_unit, '') AS business_unit_,
    model, job_id, logical_job, attempt, outcome, failure_reason,
    sum(gpu_seconds) AS gpu_seconds_,
    sum(busy_seconds) AS busy_seconds_,
    sum(unobserved_seconds) AS unobserved_seconds_,
    sumIf(greatest(gpu_seconds - busy_seconds - unobserved_seconds, 0), kind = 'allocated') AS idle_seconds_
FROM resolved_facts
WHERE window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
GROUP BY cluster, gpu_model, kind, scheduler, namespace, account, user, queue, workload_kind, team_, business_unit_,
         model, job_id, logical_job, attempt, outcome, failure_reason
