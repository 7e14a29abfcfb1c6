-- GPU-seconds per cluster of one day of gpu_usage_daily.
SELECT cluster, sum(gpu_seconds) AS gpu_seconds
FROM gpu_usage_daily
WHERE day = {day:Date}
GROUP BY cluster
ORDER BY cluster
