-- The snapshot in force of every placement of the given jobs, as attribution picks it (ended beats
-- running, then the later event; see attribution_placements.sql): what a new event changes.
SELECT node, scheduler, job_id, attempt, JSONExtractString(payload, 'uid') AS uid,
       max((if(state = 'ended', 2, 1), time)) AS rank,
       argMax(payload, (if(state = 'ended', 2, 1), time)) AS snapshot
FROM raw_scheduler_allocations
WHERE cluster = {cluster:String} AND job_id IN {jobs:Array(String)}
  AND type IN ('allocation.running', 'allocation.ended') AND node != ''
GROUP BY node, scheduler, job_id, attempt, uid
