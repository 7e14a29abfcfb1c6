-- Completed checkpoint writes of the given jobs.
SELECT job_id, attempt, finished
FROM checkpoints
WHERE cluster = {cluster:String} AND job_id IN {jobs:Array(String)} AND kind = 'write'
