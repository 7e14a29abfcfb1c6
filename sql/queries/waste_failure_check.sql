-- Attempts of one day of failure_waste_daily whose rows lose more than they failed, or a negative
-- amount, or fail or lose more GPU-seconds than their attempt record holds (job_attempts, computed
-- from the scheduler's placements, not from the facts): facts that give an attempt more than the
-- scheduler says it held, or lost work the attempt does not have.
SELECT count() AS bad
FROM
(
    SELECT cluster, scheduler, job_id, attempt,
           sum(failed_gpu_seconds) AS failed, sum(lost_gpu_seconds) AS lost,
           countIf(lost_gpu_seconds > failed_gpu_seconds + 1e-6 OR lost_gpu_seconds < -1e-9) AS bad_rows
    FROM failure_waste_daily
    WHERE day = {day:Date}
    GROUP BY cluster, scheduler, job_id, attempt
) AS w
LEFT JOIN
(
    SELECT cluster AS a_cluster, scheduler AS a_scheduler, job_id AS a_job_id, attempt AS a_attempt,
           gpu_seconds AS a_gpu_seconds, lost_gpu_seconds AS a_lost
    FROM job_attempts FINAL
) AS a ON a.a_cluster = w.cluster AND a.a_scheduler = w.scheduler AND a.a_job_id = w.job_id AND a.a_attempt = w.attempt
WHERE w.bad_rows > 0 OR w.failed > a.a_gpu_seconds + 1e-3 OR w.lost > a.a_lost + 1e-3
