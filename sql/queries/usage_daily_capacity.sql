-- Physical capacity GPU-seconds per cluster in [start, end): every written (node, window)'s physical
-- GPUs (its latest write in fact_windows) × the window. Not the facts' own sum: a GPU missing from
-- the facts, or claims beyond the GPUs, show as a difference.
SELECT cluster, sum(physical_gpus * window_seconds) AS capacity_seconds
FROM
(
    SELECT cluster, node, window_start, argMax(physical_gpus, version) AS physical_gpus,
           argMax(window_seconds, version) AS window_seconds
    FROM fact_windows
    WHERE window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
    GROUP BY cluster, node, window_start
)
GROUP BY cluster
ORDER BY cluster
