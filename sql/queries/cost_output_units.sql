-- Reported output units (e.g. tokens) per cluster and unit in [start, end).
SELECT cluster, unit, sum(quantity) AS quantity
FROM workload_outputs FINAL
WHERE time >= {start:DateTime64(3, 'UTC')} AND time < {end:DateTime64(3, 'UTC')}
GROUP BY cluster, unit
ORDER BY cluster, quantity DESC, unit
