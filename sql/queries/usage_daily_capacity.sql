-- Capacity GPU-seconds per cluster in [start, end): the latest write of every (node, window).
SELECT cluster, sum(capacity_seconds) AS capacity_seconds
FROM fact_windows FINAL
WHERE window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
GROUP BY cluster
ORDER BY cluster
