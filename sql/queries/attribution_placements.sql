-- The latest snapshot of every placement on a set of nodes that overlaps a range: ended beats
-- running, then the later event. Pending (job-level) events have no node and are not placements.
-- A pod re-created under the same name (new uid) is another placement, whatever its attempt number.
SELECT node, argMax(payload, (if(state = 'ended', 2, 1), time)) AS snapshot
FROM raw_scheduler_allocations
WHERE cluster = {cluster:String} AND node IN {nodes:Array(String)}
  AND type IN ('allocation.running', 'allocation.ended')
  AND start_time < {end:DateTime64(3, 'UTC')}
GROUP BY node, scheduler, job_id, attempt, JSONExtractString(payload, 'uid')
HAVING argMax(end_time, (if(state = 'ended', 2, 1), time)) IS NULL
    OR argMax(end_time, (if(state = 'ended', 2, 1), time)) > {start:DateTime64(3, 'UTC')}
ORDER BY node, scheduler, job_id, attempt
