-- Per node: the extent of its data, the newest activity, and what the last computation covered.
-- pending = activity rows newer than the processed seq; dirty_from = their earliest event time.
SELECT
    a.cluster,
    a.node,
    min(a.min_time) AS first_time,
    max(a.max_time) AS max_time,
    max(a.seq) AS last_seq,
    countIf(a.seq > p.processed_seq) AS pending,
    minIf(a.min_time, a.seq > p.processed_seq) AS dirty_from,
    any(p.closed_until) AS closed_until,
    any(p.processed_seq) AS processed_seq
FROM node_activity AS a
LEFT JOIN
(
    SELECT cluster, node, argMax(closed_until, version) AS closed_until, argMax(processed_seq, version) AS processed_seq
    FROM attribution_progress
    GROUP BY cluster, node
) AS p ON a.cluster = p.cluster AND a.node = p.node
GROUP BY a.cluster, a.node
