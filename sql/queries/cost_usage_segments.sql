-- GPU-seconds of [start, end) per cluster, GPU model, rate segment, kind and owner, for pricing.
-- A window's segment is the latest price boundary at or before its start ({bounds}: every rate
-- version's effective_from; 1970-01-01 when none applies yet). lost_seconds: failed attempts'
-- windows at or after their last completed checkpoint (the work a retry redoes).
SELECT
    f.cluster AS cluster,
    f.gpu_model AS gpu_model,
    arrayMax(arrayFilter(b -> b <= f.window_start,
                         arrayPushFront({bounds:Array(DateTime64(3, 'UTC'))}, toDateTime64(0, 3, 'UTC')))) AS segment_start,
    f.kind AS kind,
    if(f.kind = 'allocated', f.business_unit, '') AS business_unit,
    if(f.kind = 'allocated', f.team, '') AS team,
    if(f.kind = 'allocated', f.model, '') AS model,
    sum(f.gpu_seconds) AS gpu_seconds,
    sum(f.busy_seconds) AS busy_seconds,
    sum(f.unobserved_seconds) AS unobserved_seconds,
    sumIf(f.gpu_seconds, f.kind = 'allocated' AND f.outcome = 'failure'
                         AND (a.last_checkpoint IS NULL OR f.window_start >= a.last_checkpoint)) AS lost_seconds
FROM resolved_facts AS f
LEFT JOIN
(
    SELECT cluster AS a_cluster, scheduler AS a_scheduler, job_id AS a_job_id, attempt AS a_attempt, last_checkpoint
    FROM job_attempts FINAL
) AS a ON a.a_cluster = f.cluster AND a.a_scheduler = f.scheduler AND a.a_job_id = f.job_id AND a.a_attempt = f.attempt
WHERE f.window_start >= {start:DateTime64(3, 'UTC')} AND f.window_start < {end:DateTime64(3, 'UTC')}
GROUP BY cluster, gpu_model, segment_start, kind, business_unit, team, model
ORDER BY cluster, gpu_model, segment_start, kind, business_unit, team, model
