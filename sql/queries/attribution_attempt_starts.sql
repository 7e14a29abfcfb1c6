-- When each attempt of the given jobs started (any node): an attempt without an end record ends
-- when a later attempt of its job starts (streams/attribution/attempts.py, end_superseded).
SELECT scheduler, job_id, attempt, min(start_time) AS start
FROM raw_scheduler_allocations
WHERE cluster = {cluster:String} AND job_id IN {jobs:Array(String)}
  AND type IN ('allocation.running', 'allocation.ended') AND start_time IS NOT NULL
GROUP BY scheduler, job_id, attempt
