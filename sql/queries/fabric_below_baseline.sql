-- Node sets of one day of fabric_health that ran below their baseline.
SELECT cluster, collective, node_set, avg_busbw_gbps, baseline_gbps, ratio
FROM fabric_health
WHERE day = {day:Date} AND below_baseline
ORDER BY cluster, collective, node_set
