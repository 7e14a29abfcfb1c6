-- The (node, window)s of [start, end) whose current facts (allocated + unallocated + unavailable)
-- are not their node's physical GPUs × the window; the first {limit} in time order.
SELECT w.cluster AS cluster, w.node AS node, w.window_start AS window_start,
       w.physical_gpus * w.window_seconds AS physical_seconds, f.seconds AS fact_seconds
FROM
(
    SELECT cluster, node, window_start, max(version) AS latest, argMax(physical_gpus, version) AS physical_gpus,
           argMax(window_seconds, version) AS window_seconds
    FROM fact_windows
    WHERE window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
    GROUP BY cluster, node, window_start
) AS w
LEFT JOIN
(
    SELECT cluster, node, window_start, version, sum(gpu_seconds) AS seconds
    FROM gpu_usage_facts FINAL
    WHERE window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
    GROUP BY cluster, node, window_start, version
) AS f ON f.cluster = w.cluster AND f.node = w.node AND f.window_start = w.window_start AND f.version = w.latest
WHERE abs(f.seconds - w.physical_gpus * w.window_seconds) > 1e-6
ORDER BY window_start, cluster, node
LIMIT {limit:UInt32}
