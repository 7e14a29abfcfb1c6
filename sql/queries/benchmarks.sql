-- nccl-tests runs in [start, end), newest first.
SELECT
    run_id, time, collective, hosts, length(hosts) AS host_count, ranks, nccl_version,
    avg_busbw_gbps, max_busbw_gbps, wrong_total, out_of_bounds, ok
FROM benchmark_runs FINAL
WHERE time >= {start:DateTime64(3, 'UTC')} AND time < {end:DateTime64(3, 'UTC')}
  AND ({cluster:String} = '' OR cluster = {cluster:String})
ORDER BY time DESC, run_id
