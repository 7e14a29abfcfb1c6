-- One node's GPU samples for a range (the caller widens the start for sample-and-hold).
SELECT time, uuid, mig_instance, gpu_index, gpu_model, mig_profile, utilization, xid, namespace, pod, hpc_job, interval_s
FROM gpu_samples
WHERE cluster = {cluster:String} AND node = {node:String}
  AND time >= {start:DateTime64(3, 'UTC')} AND time < {end:DateTime64(3, 'UTC')}
ORDER BY time
