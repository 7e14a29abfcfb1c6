-- The (cluster, node, hour) from {since}'s hour on whose latest rollup rebuild is older than what it
-- summarises: never built, or built before the newest facts write of one of its windows, or before
-- the first arrival of an org version starting before the hour's end (conservatively: a version may
-- change every hour from its start on). Versions and arrivals are compared as wall-clock ns.
SELECT w.cluster, w.node, w.hour
FROM
(
    SELECT cluster, node, toStartOfHour(window_start) AS hour, toDateTime64(hour, 3, 'UTC') + toIntervalHour(1) AS hour_end,
           max(version) AS facts_version, toUInt8(1) AS one
    FROM fact_windows
    WHERE window_start >= toStartOfHour({since:DateTime64(3, 'UTC')})
    GROUP BY cluster, node, hour
) AS w
LEFT JOIN
(
    SELECT cluster, node, hour, max(version) AS built
    FROM gpu_usage_hourly
    WHERE kind = '' AND hour >= toStartOfHour({since:DateTime64(3, 'UTC')})
    GROUP BY cluster, node, hour
) AS b ON b.cluster = w.cluster AND b.node = w.node AND b.hour = w.hour
ASOF LEFT JOIN
(
    -- per org version: the newest first arrival among it and every earlier-starting version
    SELECT toUInt8(1) AS one, effective_from,
           max(arrived) OVER (ORDER BY effective_from ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS org_arrived
    FROM
    (
        SELECT effective_from, toUInt64(toUnixTimestamp64Nano(min(ingested_at))) AS arrived
        FROM org_mappings
        GROUP BY effective_from
    )
) AS o ON w.one = o.one AND w.hour_end > o.effective_from
WHERE b.built < w.facts_version OR b.built < o.org_arrived
ORDER BY w.cluster, w.hour, w.node
