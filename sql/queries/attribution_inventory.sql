-- The GPUs a set of nodes reported within the inventory horizon before a range, and until its end:
-- index, model, first and last time seen, and the last fatal / clearing XID before the step's
-- loaded samples start (its state before them: per hour only the latest of each is kept, so a GPU
-- whose XID flapped within the hour of that start is known from the latest flap). Epoch ms.
SELECT node, uuid, anyLast(gpu_index) AS gpu_index, anyLast(gpu_model) AS gpu_model,
       toUnixTimestamp64Milli(min(first_time)) AS first_ms, toUnixTimestamp64Milli(max(last_time)) AS last_ms,
       toUnixTimestamp64Milli(maxIf(last_fatal, last_fatal < {loaded:DateTime64(3, 'UTC')})) AS fatal_ms,
       toUnixTimestamp64Milli(maxIf(last_clear, last_clear < {loaded:DateTime64(3, 'UTC')})) AS clear_ms
FROM gpu_inventory
WHERE cluster = {cluster:String} AND node IN {nodes:Array(String)}
  AND hour >= {since:DateTime('UTC')} AND hour < {end:DateTime('UTC')}
GROUP BY node, uuid
ORDER BY node, uuid
