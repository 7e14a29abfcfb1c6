-- Rebuilds of the hourly rollup not finished yet, oldest request first: (cluster, requested, since, done_until).
SELECT cluster, requested, argMax(since, version), argMax(done_until, version)
FROM rollup_rebuilds
GROUP BY cluster, requested
HAVING argMax(finished, version) = 0
ORDER BY requested, cluster
