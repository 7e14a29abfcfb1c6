-- Idle capacity in [start, end): allocated-but-idle GPU-hours per team / node / GPU model, and the
-- unallocated and unavailable capacity beside it, with the busy time on GPUs nobody held (a rogue
-- process or missing scheduler data: "busy without an owner").
-- {by}: one dimension or several ('team', 'business_unit,node'); a key joins their values with \x1F
WITH splitByChar(',', {by:String}) AS dims
SELECT
    arrayStringConcat(arrayMap(d -> multiIf(d = 'node', toString(node), d = 'gpu_model', toString(gpu_model),
                                            d = 'business_unit', business_unit, team), dims), '\x1F') AS key,
    sumIf(gpu_seconds - busy_seconds - unobserved_seconds, kind = 'allocated') / 3600 AS allocated_idle_gpu_hours,
    sumIf(gpu_seconds, kind = 'allocated') / 3600 AS allocated_gpu_hours,
    sumIf(gpu_seconds, kind = 'unallocated') / 3600 AS unallocated_gpu_hours,
    sumIf(gpu_seconds, kind = 'unavailable') / 3600 AS unavailable_gpu_hours,
    sumIf(busy_seconds, kind = 'unallocated') / 3600 AS unowned_busy_gpu_hours,
    if(sumIf(gpu_seconds, kind = 'allocated') > 0,
       sumIf(gpu_seconds - busy_seconds - unobserved_seconds, kind = 'allocated') / sumIf(gpu_seconds, kind = 'allocated'),
       0) AS idle_share
FROM resolved_facts
WHERE window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
  AND ({cluster:String} = '' OR cluster = {cluster:String})
  AND (hasAny(dims, ['node', 'gpu_model']) OR kind = 'allocated')
GROUP BY key
ORDER BY allocated_idle_gpu_hours + unallocated_gpu_hours DESC
