-- The GPUs a set of nodes reported within the inventory horizon before a range, and until its end:
-- index, model, first and last time seen, and the last fatal / clearing XID before the node's own
-- loaded samples start (`loaded_ms`, one per node in the order of `nodes`: nodes of one group start
-- their look-back at different times). That is its state before them: per hour only the latest of
-- each is kept, so a GPU whose XID flapped within the hour of that start is known from the latest
-- flap. Epoch ms.
SELECT node, uuid, anyLast(gpu_index) AS gpu_index, anyLast(gpu_model) AS gpu_model,
       toUnixTimestamp64Milli(min(first_time)) AS first_ms, toUnixTimestamp64Milli(max(last_time)) AS last_ms,
       toUnixTimestamp64Milli(maxIf(last_fatal, toUnixTimestamp64Milli(last_fatal) < loaded_ms)) AS fatal_ms,
       toUnixTimestamp64Milli(maxIf(last_clear, toUnixTimestamp64Milli(last_clear) < loaded_ms)) AS clear_ms
FROM
(
    SELECT node, uuid, gpu_index, gpu_model, first_time, last_time, last_fatal, last_clear,
           arrayElement({loaded_ms:Array(Int64)}, indexOf({nodes:Array(String)}, node)) AS loaded_ms
    FROM gpu_inventory
    WHERE cluster = {cluster:String} AND node IN {nodes:Array(String)}
      AND hour >= {since:DateTime('UTC')} AND hour < {end:DateTime('UTC')}
)
GROUP BY node, uuid
ORDER BY node, uuid
