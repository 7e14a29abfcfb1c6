-- GPU samples of a set of nodes for a range (the caller widens the start for sample-and-hold),
-- node by node in time order; times as epoch milliseconds so the worker reads plain integers.
SELECT node, toUnixTimestamp64Milli(time) AS time_ms, uuid, mig_instance, gpu_index, gpu_model, mig_profile,
       utilization, xid, namespace, pod, hpc_job, interval_s, power_w, energy_mj
FROM gpu_samples
WHERE cluster = {cluster:String} AND node IN {nodes:Array(String)}
  AND time >= {start:DateTime64(3, 'UTC')} AND time < {end:DateTime64(3, 'UTC')}
ORDER BY node, time
