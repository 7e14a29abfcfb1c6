-- Claims on one GPU (or a node's GPUs without ids, gpu = '') beyond its capacity in [start, end),
-- from the latest write of each window only: per node and GPU, the windows concerned, the GPU-hours
-- claimed beyond capacity (scaled down so capacity holds), and the owners (scheduler:job#attempt).
SELECT
    c.cluster AS cluster, c.node AS node, c.gpu_uuid AS gpu, count() AS windows,
    min(c.window_start) AS first_window, max(c.window_start) AS last_window,
    sum(c.claimed_seconds - c.capacity_seconds) / 3600 AS excess_gpu_hours,
    arraySort(groupUniqArrayArray(c.owners)) AS owners
FROM attribution_conflicts AS c FINAL
INNER JOIN
(
    SELECT cluster, node, window_start, max(version) AS latest
    FROM fact_windows
    WHERE window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
      AND ({cluster:String} = '' OR cluster = {cluster:String})
    GROUP BY cluster, node, window_start
) AS w ON w.cluster = c.cluster AND w.node = c.node AND w.window_start = c.window_start AND w.latest = c.version
WHERE c.window_start >= {start:DateTime64(3, 'UTC')} AND c.window_start < {end:DateTime64(3, 'UTC')}
  AND ({cluster:String} = '' OR c.cluster = {cluster:String})
GROUP BY cluster, node, gpu
ORDER BY excess_gpu_hours DESC, cluster, node, gpu
