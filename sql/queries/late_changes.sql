-- Days (UTC) before {today} whose inputs changed after {since} (wall-clock ns, as the workers'
-- versions are): a facts write of one of the day's windows (fact_windows.version), or an attempt
-- record (job_attempts.version) whose run overlaps the day — an attempt that fails days later
-- changes every day it ran. With the newest change of each day.
SELECT day, max(changed) AS changed
FROM
(
    SELECT toDate(window_start) AS day, version AS changed
    FROM fact_windows
    WHERE version > {since:UInt64}
    UNION ALL
    SELECT arrayJoin(arrayMap(i -> toDate(start_time) + i,
                              range(toUInt32(dateDiff('day', toDate(start_time), toDate(ifNull(end_time, start_time))) + 1)))) AS day,
           version AS changed
    FROM job_attempts
    WHERE version > {since:UInt64} AND start_time IS NOT NULL
)
WHERE day < {today:Date}
GROUP BY day
ORDER BY day
