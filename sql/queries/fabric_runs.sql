-- nccl-tests runs in [start, end), oldest first (the history a day's runs are compared with).
SELECT cluster, collective, run_id, time, hosts, avg_busbw_gbps, ok
FROM benchmark_runs FINAL
WHERE time >= {start:DateTime64(3, 'UTC')} AND time < {end:DateTime64(3, 'UTC')}
ORDER BY time, run_id
