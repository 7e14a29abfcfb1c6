-- Drained / down / up states of a set of nodes (with the GPU count the source declares) up to a
-- range end, oldest first; a node keeps its last state until the next one.
SELECT node, toUnixTimestamp64Milli(time) AS time_ms, payload
FROM raw_scheduler_allocations FINAL
WHERE cluster = {cluster:String} AND job_id = '' AND node IN {nodes:Array(String)} AND type = 'node.state'
  AND time < {end:DateTime64(3, 'UTC')}
ORDER BY node, time
