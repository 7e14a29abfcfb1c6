-- Per cluster and GPU model, the month's GPU-seconds by kind from gpu_usage_daily, the lost work
-- from failure_waste_daily, and how many days have data.
SELECT
    u.cluster AS cluster, u.gpu_model AS gpu_model, u.days AS days, u.capacity AS capacity,
    u.unavailable AS unavailable, u.allocated AS allocated, u.busy AS busy, u.unobserved AS unobserved,
    ifNull(l.lost, 0) AS lost
FROM
(
    SELECT cluster, gpu_model, uniqExact(day) AS days, sum(gpu_seconds) AS capacity,
           sumIf(gpu_seconds, kind = 'unavailable') AS unavailable, sumIf(gpu_seconds, kind = 'allocated') AS allocated,
           sumIf(busy_seconds, kind = 'allocated') AS busy, sumIf(unobserved_seconds, kind = 'allocated') AS unobserved
    FROM gpu_usage_daily
    WHERE day >= {start:Date} AND day < {end:Date}
    GROUP BY cluster, gpu_model
) AS u
LEFT JOIN
(
    SELECT cluster, gpu_model, sum(lost_gpu_seconds) AS lost
    FROM failure_waste_daily
    WHERE day >= {start:Date} AND day < {end:Date}
    GROUP BY cluster, gpu_model
) AS l ON l.cluster = u.cluster AND l.gpu_model = u.gpu_model
ORDER BY cluster, gpu_model
