-- Per node: the extent of its data, the newest activity, and what the last computation covered.
-- pending = activity rows newer than the processed seq; dirty_from = their earliest event time.
-- Only activity after the least-progressed due node is read (min-max index on seq, see 0008); a
-- node never computed yet counts as progressed to 0, so until its first step all activity is read.
WITH
    progress AS
    (
        SELECT cluster, node, argMax(closed_until, version) AS closed_until,
               argMax(processed_seq, version) AS processed_seq
        FROM attribution_progress
        GROUP BY cluster, node
    ),
    summary AS
    (
        SELECT cluster, node, min(first_time) AS first_time, max(max_time) AS max_time, max(last_seq) AS last_seq
        FROM node_activity_summary
        GROUP BY cluster, node
    )
SELECT
    s.cluster AS cluster,
    s.node AS node,
    s.first_time AS first_time,
    s.max_time AS max_time,
    s.last_seq AS last_seq,
    d.pending AS pending,
    d.dirty_from AS dirty_from,
    p.closed_until AS closed_until,
    p.processed_seq AS processed_seq
FROM summary AS s
LEFT JOIN progress AS p ON s.cluster = p.cluster AND s.node = p.node
LEFT JOIN
(
    SELECT a.cluster AS cluster, a.node AS node, count() AS pending, min(a.min_time) AS dirty_from
    FROM node_activity AS a
    LEFT JOIN progress AS q ON a.cluster = q.cluster AND a.node = q.node
    WHERE a.seq > (
        SELECT ifNull(min(if(x.last_seq > y.processed_seq, y.processed_seq, NULL)), toUInt64(18446744073709551615))
        FROM summary AS x
        LEFT JOIN progress AS y ON x.cluster = y.cluster AND x.node = y.node
    )
      AND a.seq > q.processed_seq
    GROUP BY a.cluster, a.node
) AS d ON s.cluster = d.cluster AND s.node = d.node
