-- Rows of one day of failure_waste_daily that lose more than they failed, or a negative amount.
SELECT count() AS bad
FROM failure_waste_daily
WHERE day = {day:Date} AND (lost_gpu_seconds > failed_gpu_seconds + 1e-6 OR lost_gpu_seconds < 0)
