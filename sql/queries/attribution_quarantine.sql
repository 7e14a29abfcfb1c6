-- The nodes in quarantine now: (cluster, node, reason, input_seq, since, tried = its last failure's seq).
SELECT cluster, node, argMax(reason, version) AS reason, argMax(input_seq, version) AS input_seq,
       argMax(since, version) AS since, max(version) AS tried
FROM attribution_quarantine
GROUP BY cluster, node
HAVING reason != ''
ORDER BY cluster, node
