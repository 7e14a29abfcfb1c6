-- Queue time of the attempts that started in [start, end): wall-clock wait and GPU-seconds waited.
SELECT
    toDate({start:DateTime64(3, 'UTC')}) AS day,
    cluster, scheduler, queue, workload_kind,
    count() AS attempts,
    sum(queue_seconds) AS wait_seconds,
    quantileExact(0.5)(queue_seconds) AS p50_wait_seconds,
    quantileExact(0.95)(queue_seconds) AS p95_wait_seconds,
    max(queue_seconds) AS max_wait_seconds,
    sum(ifNull(queue_gpu_seconds, 0)) AS waited_gpu_seconds
FROM job_attempts FINAL
WHERE start_time >= {start:DateTime64(3, 'UTC')} AND start_time < {end:DateTime64(3, 'UTC')}
  AND queue_seconds IS NOT NULL
GROUP BY cluster, scheduler, queue, workload_kind
