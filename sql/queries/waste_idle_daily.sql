-- Idle GPU-seconds of [start, end) by GPU model, node and team: allocated-but-idle (allocated minus
-- busy minus unobserved), unallocated and unavailable capacity.
SELECT
    toDate({start:DateTime64(3, 'UTC')}) AS day,
    cluster, gpu_model, node,
    if(kind = 'allocated', 'allocated_idle', kind) AS kind_,
    if(kind = 'allocated', team, '') AS team_,
    if(kind = 'allocated', business_unit, '') AS business_unit_,
    sum(gpu_seconds) AS gpu_seconds_,
    sum(if(kind = 'allocated', greatest(gpu_seconds - busy_seconds - unobserved_seconds, 0), gpu_seconds)) AS idle_seconds_,
    sum(unobserved_seconds) AS unobserved_seconds_
FROM resolved_facts
WHERE window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
GROUP BY cluster, gpu_model, node, kind_, team_, business_unit_
