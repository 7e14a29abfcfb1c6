-- Queue time per scheduler queue / partition for attempts that started in [start, end):
-- wall-clock wait and GPU-seconds waited (requested GPUs × wait).
SELECT
    scheduler,
    if(queue = '', '(none)', queue) AS queue,
    count() AS attempts,
    avg(queue_seconds) AS avg_wait_s,
    quantileExact(0.5)(queue_seconds) AS p50_wait_s,
    quantileExact(0.95)(queue_seconds) AS p95_wait_s,
    max(queue_seconds) AS max_wait_s,
    sum(queue_gpu_seconds) / 3600 AS waited_gpu_hours
FROM job_attempts FINAL
WHERE start_time >= {start:DateTime64(3, 'UTC')} AND start_time < {end:DateTime64(3, 'UTC')}
  AND queue_seconds IS NOT NULL
  AND ({cluster:String} = '' OR cluster = {cluster:String})
GROUP BY scheduler, queue
ORDER BY waited_gpu_hours DESC
