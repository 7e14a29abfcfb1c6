-- The effective cluster unit cost of one month, every term of the formula.
SELECT cluster, currency, compute, network, storage, support, operations, idle, retries, total,
       accepted_units, unit_kind, unit_cost, capacity_gpu_hours, allocated_gpu_hours, idle_gpu_hours, lost_gpu_hours
FROM effective_cluster_unit_cost_monthly
WHERE month = {month:Date}
ORDER BY cluster
