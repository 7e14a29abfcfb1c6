-- GPU-hours per owner group for [start, end): allocated, busy, failed (attempts that did not
-- succeed), unobserved; unallocated and unavailable capacity as the rows __unallocated__ and
-- __unavailable__; energy_kwh: the energy of those GPU-seconds. The group is chosen by {by}, a parameter, never spliced into the text.
-- The facts-level form of gpu_hours.sql (every window read through resolved_facts): the reference
-- that the hourly rollup's answer is compared with.
-- {by}: one dimension or several ('team', 'team,model'); a key joins their values with \x1F
WITH splitByChar(',', {by:String}) AS dims
SELECT
    arrayStringConcat(
        if(kind = 'allocated',
           arrayMap(d -> multiIf(d = 'team', team,
                        d = 'business_unit', business_unit,
                        d = 'namespace', namespace,
                        d = 'account', account,
                        d = 'model', model,
                        d = 'job', logical_job,
                        d = 'node', toString(node),
                        d = 'gpu_model', toString(gpu_model),
                        d = 'failure_reason', failure_reason,
                        d = 'cluster', toString(cluster),
                        d = 'user', user,
                        d = 'queue', queue,
                        d = 'workload_kind', workload_kind,
                        'all'), dims),
           [concat('__', kind, '__')]),
        '\x1F') AS key,
    sumIf(gpu_seconds, kind = 'allocated') / 3600 AS allocated_gpu_hours,
    sum(busy_seconds) / 3600 AS busy_gpu_hours,
    sumIf(gpu_seconds, kind = 'allocated' AND outcome = 'failure') / 3600 AS failed_gpu_hours,
    sum(unobserved_seconds) / 3600 AS unobserved_gpu_hours,
    (sumIf(gpu_seconds, kind = 'allocated') - sumIf(busy_seconds, kind = 'allocated')
        - sumIf(unobserved_seconds, kind = 'allocated')) / 3600 AS idle_gpu_hours,
    sum(energy_joules) / 3600000 AS energy_kwh,
    sum(gpu_seconds) / 3600 AS gpu_hours
FROM resolved_facts
WHERE window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
  AND ({cluster:String} = '' OR cluster = {cluster:String})
GROUP BY key
ORDER BY startsWith(key, '__'), gpu_hours DESC, key
