-- Every allocation event of the given jobs (all attempts), for attempt facts.
SELECT time, payload
FROM raw_scheduler_allocations
WHERE cluster = {cluster:String} AND job_id IN {jobs:Array(String)} AND type LIKE 'allocation.%'
ORDER BY job_id, attempt, time
