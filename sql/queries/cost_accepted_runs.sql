-- Successful runs per cluster in [start, end): logical jobs with an attempt that succeeded then.
SELECT cluster, uniqExact(scheduler, if(logical_job = '', job_id, logical_job)) AS runs
FROM job_attempts FINAL
WHERE outcome = 'success' AND end_time >= {start:DateTime64(3, 'UTC')} AND end_time < {end:DateTime64(3, 'UTC')}
GROUP BY cluster
ORDER BY cluster
