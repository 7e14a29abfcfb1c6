-- The inventory's view sums each insert of samples itself: one row per (cluster, node, hour, GPU)
-- of the insert, not one per sample. The table (0011) already keeps one row per key once its parts
-- merge (min and max of the times, the last index and model, the latest fatal and clearing XID);
-- the view wrote every sample and left the summing to those merges. A node's history sent in
-- bulk (120 scrapes an hour) now writes 120 times fewer inventory rows, which a quarter of the
-- endpoint's time of a samples insert went to; a live scrape writes what it wrote before. Same
-- values: the aggregates are the ones the merges apply.
ALTER TABLE gpu_inventory_mv MODIFY QUERY
SELECT cluster, node, toStartOfHour(time) AS hour, uuid, min(time) AS first_time, max(time) AS last_time,
       anyLast(gpu_index) AS gpu_index, anyLast(toString(gpu_model)) AS gpu_model,
       maxIf(time, xid IN (48, 63, 64, 74, 79, 92, 94, 95, 119, 120)) AS last_fatal,
       maxIf(time, xid IS NOT NULL AND xid NOT IN (48, 63, 64, 74, 79, 92, 94, 95, 119, 120)) AS last_clear
FROM gpu_samples
GROUP BY cluster, node, hour, uuid;
