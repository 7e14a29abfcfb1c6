-- Why allocated GPUs sat idle in [start, end) (docs/ATTRIBUTION.md "Idle causes"): every allocated
-- fact row's idle GPU-seconds (gpu − busy − unobserved, exactly as report gpu-hours counts them)
-- split into causes, in this fixed order, each taking what the earlier ones left, up to the GPU-seconds
-- it covered in the row's window:
--   checkpoint       a checkpoint of the attempt was being written (checkpoint events, kind write);
--   storage_stall    the node's storage throughput was at or above {ceiling_ratio} of its ceiling (the
--                    highest throughput it reached in the 7 UTC days up to that day);
--   fabric_degraded  the node's latest NCCL run had failed or ran below (1 − {tolerance}) × its baseline
--                    (the median of the earlier passing runs of the same node set, or of the same
--                    collective and host count in the cluster; at least 3 runs);
--   startup          from the attempt's start to its first busy window, at most {phase_seconds};
--   teardown         from its last busy window to its end (ended attempts), at most {phase_seconds};
--   idle             the rest: the application left the GPU idle.
-- The row `unobserved` (allocated time without metrics) is given beside them; it is not part of
-- idle_gpu_hours, as in report gpu-hours. Cost: the GPU-hours at the rate of the row's GPU model in
-- the pricing version in force at the window (0 where no rate is known).
WITH
    splitByChar(',', {by:String}) AS dims,
    {start:DateTime64(3, 'UTC')} AS range_start,
    {end:DateTime64(3, 'UTC')} AS range_end,
    toFloat64({phase_seconds:UInt32}) AS phase_s,
    toUnixTimestamp64Milli(range_start) / 1000 AS rs,
    toUnixTimestamp64Milli(range_end) / 1000 AS re,
    -- the facts' window length (one per deployment; a setting)
    (SELECT toFloat64(if(count() > 0, max(window_seconds), 60)) FROM gpu_usage_facts
     WHERE window_start >= range_start AND window_start < range_end) AS w,
    facts AS
    (
        SELECT cluster, node, window_start, window_seconds, scheduler, job_id, attempt, gpu_model,
               arrayStringConcat(arrayMap(d -> multiIf(d = 'team', team, d = 'business_unit', business_unit,
                                                       d = 'model', model, d = 'job', logical_job,
                                                       d = 'namespace', namespace, d = 'node', toString(node),
                                                       d = 'gpu_model', toString(gpu_model),
                                                       d = 'cluster', toString(cluster), 'all'), dims),
                                 '\x1F') AS key,
               gpu_seconds, busy_seconds, unobserved_seconds,
               gpu_seconds - busy_seconds - unobserved_seconds AS idle,
               toUnixTimestamp64Milli(window_start) / 1000 AS ws
        FROM resolved_facts
        WHERE kind = 'allocated' AND window_start >= range_start AND window_start < range_end
          AND ({cluster:String} = '' OR cluster = {cluster:String})
    ),
    -- the parts [s, e) of the intervals that fall in each window [k·w, (k+1)·w); a row takes their
    -- overlap with the attempt's part of the window
    checkpoint_cover AS
    (
        SELECT cluster, job_id, ifNull(attempt, 0) AS c_attempt, toDateTime64(k * w, 3, 'UTC') AS window_start,
               groupArray((greatest(s, k * w), least(e, (k + 1) * w))) AS spans
        FROM
        (
            SELECT cluster, job_id, attempt, toUnixTimestamp64Milli(started) / 1000 AS s,
                   toUnixTimestamp64Milli(finished) / 1000 AS e
            FROM checkpoints FINAL
            WHERE kind = 'write' AND finished > range_start AND started < range_end
              AND ({cluster:String} = '' OR cluster = {cluster:String})
        )
        ARRAY JOIN range(toUInt64(floor(greatest(s, rs) / w)), toUInt64(ceil(least(e, re) / w))) AS k
        GROUP BY cluster, job_id, c_attempt, window_start
    ),
    storage_rates AS
    (
        -- the node's throughput between two scrapes: the sum over its devices of the counters' increase
        SELECT cluster, node, t0, t, sum(rate) AS rate
        FROM
        (
            SELECT cluster, node, device, fs_type, time,
                   toUnixTimestamp64Milli(time) / 1000 AS t,
                   lagInFrame(toUnixTimestamp64Milli(time) / 1000, 1, 0.)
                       OVER (PARTITION BY cluster, node, fs_type, device ORDER BY time
                             ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS t0,
                   read_bytes + write_bytes AS bytes,
                   lagInFrame(read_bytes + write_bytes, 1, -1.)
                       OVER (PARTITION BY cluster, node, fs_type, device ORDER BY time
                             ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS prev,
                   if(t0 > 0 AND prev >= 0 AND bytes >= prev AND t > t0, (bytes - prev) / (t - t0), 0.) AS rate
            FROM storage_samples FINAL
            WHERE job_id = '' AND time >= toStartOfDay(range_start) - toIntervalDay(7)
              AND time < range_end + toIntervalHour(1)
              AND ({cluster:String} = '' OR cluster = {cluster:String})
        )
        WHERE t0 > 0
        GROUP BY cluster, node, t0, t
    ),
    storage_ceiling AS
    (
        SELECT cluster, node, day,
               max(day_max) OVER (PARTITION BY cluster, node ORDER BY day_number
                                  RANGE BETWEEN 6 PRECEDING AND CURRENT ROW) AS ceiling
        FROM
        (
            SELECT cluster, node, toDate(toDateTime(toUInt32(t), 'UTC')) AS day,
                   toUInt32(toDate(toDateTime(toUInt32(t), 'UTC'))) AS day_number, max(rate) AS day_max
            FROM storage_rates
            GROUP BY cluster, node, day
        )
    ),
    storage_cover AS
    (
        SELECT cluster, node, toDateTime64(k * w, 3, 'UTC') AS window_start,
               groupArray((greatest(s, k * w), least(e, (k + 1) * w))) AS spans
        FROM
        (
            SELECT r.cluster AS cluster, r.node AS node, r.t0 AS s, r.t AS e
            FROM storage_rates AS r
            INNER JOIN storage_ceiling AS c
                ON c.cluster = r.cluster AND c.node = r.node AND c.day = toDate(toDateTime(toUInt32(r.t), 'UTC'))
            WHERE c.ceiling > 0 AND r.rate >= {ceiling_ratio:Float64} * c.ceiling AND r.t > rs AND r.t0 < re
        )
        ARRAY JOIN range(toUInt64(floor(greatest(s, rs) / w)), toUInt64(ceil(least(e, re) / w))) AS k
        GROUP BY cluster, node, window_start
    ),
    runs AS
    (
        SELECT cluster, collective, time, hosts, ok,
               arrayStringConcat(arraySort(arrayDistinct(hosts)), ',') AS node_set, length(arrayDistinct(hosts)) AS size,
               if(ok AND avg_busbw_gbps IS NOT NULL, avg_busbw_gbps, NULL) AS good_busbw
        FROM benchmark_runs FINAL
        WHERE time < range_end AND ({cluster:String} = '' OR cluster = {cluster:String})
    ),
    judged AS
    (
        SELECT cluster, time, hosts,
               multiIf(set_runs >= 3, set_median, peer_runs >= 3, peer_median, NULL) AS baseline,
               NOT ok OR (baseline IS NOT NULL AND (good_busbw IS NULL OR good_busbw < (1 - {tolerance:Float64}) * baseline))
                   AS degraded
        FROM
        (
            SELECT *,
                   count(good_busbw) OVER (PARTITION BY cluster, collective, node_set ORDER BY time
                                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS set_runs,
                   median(good_busbw) OVER (PARTITION BY cluster, collective, node_set ORDER BY time
                                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS set_median,
                   count(good_busbw) OVER (PARTITION BY cluster, collective, size ORDER BY time
                                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS peer_runs,
                   median(good_busbw) OVER (PARTITION BY cluster, collective, size ORDER BY time
                                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS peer_median
            FROM runs
        )
    ),
    fabric_cover AS
    (
        SELECT cluster, node, toDateTime64(k * w, 3, 'UTC') AS window_start,
               groupArray((greatest(s, k * w), least(e, (k + 1) * w))) AS spans
        FROM
        (
            -- each node's runs in time order: a run's verdict holds until the node's next run
            SELECT cluster, node, s, e, degraded
            FROM
            (
                SELECT cluster, node, toUnixTimestamp64Milli(time) / 1000 AS s, degraded,
                       leadInFrame(toUnixTimestamp64Milli(time) / 1000, 1, toFloat64(4102444800))
                           OVER (PARTITION BY cluster, node ORDER BY time
                                 ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING) AS e
                FROM judged
                ARRAY JOIN arrayDistinct(hosts) AS node
            )
            WHERE degraded AND e > rs AND s < re
        )
        ARRAY JOIN range(toUInt64(floor(greatest(s, rs) / w)), toUInt64(ceil(least(e, re) / w))) AS k
        GROUP BY cluster, node, window_start
    ),
    phases AS
    (
        -- each attempt's start and end, and its first and last busy windows near them
        SELECT a.cluster AS cluster, a.scheduler AS scheduler, a.job_id AS job_id, a.attempt AS attempt,
               a.s AS s, a.e AS e,
               if(b.first_busy > 0, least(b.first_busy, a.s + phase_s), a.s + phase_s) AS startup_end,
               if(a.e < 4102444800, if(b.last_busy > 0, greatest(b.last_busy, a.e - phase_s), a.e - phase_s), a.e)
                   AS teardown_start
        FROM
        (
            SELECT cluster, scheduler, job_id, attempt,
                   toUnixTimestamp64Milli(assumeNotNull(start_time)) / 1000 AS s,
                   if(end_time IS NULL, toFloat64(4102444800), toUnixTimestamp64Milli(assumeNotNull(end_time)) / 1000) AS e
            FROM job_attempts FINAL
            WHERE start_time IS NOT NULL AND start_time < range_end
              AND (end_time IS NULL OR end_time > range_start)
              AND ({cluster:String} = '' OR cluster = {cluster:String})
        ) AS a
        LEFT JOIN
        (
            SELECT cluster, scheduler, job_id, attempt,
                   minIf(toUnixTimestamp64Milli(window_start) / 1000, busy_seconds > 0) AS first_busy,
                   maxIf(toUnixTimestamp64Milli(window_start) / 1000 + window_seconds, busy_seconds > 0) AS last_busy
            FROM current_facts
            WHERE kind = 'allocated'
              AND window_start >= range_start - toIntervalSecond({phase_seconds:UInt32}) - toIntervalHour(1)
              AND window_start < range_end + toIntervalSecond({phase_seconds:UInt32}) + toIntervalHour(1)
              AND ({cluster:String} = '' OR cluster = {cluster:String})
            GROUP BY cluster, scheduler, job_id, attempt
        ) AS b ON b.cluster = a.cluster AND b.scheduler = a.scheduler AND b.job_id = a.job_id AND b.attempt = a.attempt
    ),
    rates AS
    (
        SELECT cluster, effective_from, gpu_model, toFloat64(hourly_rate) AS hourly_rate, currency
        FROM current_pricing_rates
    ),
    split AS
    (
        SELECT f.key AS key, f.gpu_seconds AS gpu_seconds, f.idle AS idle, f.unobserved_seconds AS unobserved,
               ifNull(p.s, f.ws) AS a_s, ifNull(p.e, f.ws + f.window_seconds) AS a_e,
               -- the attempt's part of the window: [h0, h1)
               greatest(a_s, f.ws) AS h0, least(a_e, f.ws + f.window_seconds) AS h1,
               -- the part of the window the attempt held, and the row's GPU-seconds per second of it
               greatest(least(a_e, f.ws + f.window_seconds) - greatest(a_s, f.ws), 0.) AS held,
               if(held > 0, f.gpu_seconds / held, f.gpu_seconds / f.window_seconds) AS per_second,
               -- each cause's spans in the window, overlapped with the attempt's part of it, at most all of it
               per_second * least(arraySum(x -> ifNull(greatest(least(x.2, h1) - greatest(x.1, h0), 0.), 0.),
                                           arrayConcat(c1.spans, c0.spans)), held) AS cover_checkpoint,
               per_second * least(arraySum(x -> ifNull(greatest(least(x.2, h1) - greatest(x.1, h0), 0.), 0.), st.spans), held)
                   AS cover_storage,
               per_second * least(arraySum(x -> ifNull(greatest(least(x.2, h1) - greatest(x.1, h0), 0.), 0.), fb.spans), held)
                   AS cover_fabric,
               per_second * greatest(least(ifNull(p.startup_end, 0.), f.ws + f.window_seconds, a_e)
                                     - greatest(a_s, f.ws), 0.) AS cover_startup,
               per_second * greatest(least(a_e, f.ws + f.window_seconds)
                                     - greatest(ifNull(p.teardown_start, 4102444800.), f.ws, a_s), 0.) AS cover_teardown,
               greatest(least(idle, cover_checkpoint), 0.) AS checkpoint,
               greatest(least(idle - checkpoint, cover_storage), 0.) AS storage_stall,
               greatest(least(idle - checkpoint - storage_stall, cover_fabric), 0.) AS fabric_degraded,
               greatest(least(idle - checkpoint - storage_stall - fabric_degraded, cover_startup), 0.) AS startup,
               greatest(least(idle - checkpoint - storage_stall - fabric_degraded - startup, cover_teardown), 0.)
                   AS teardown,
               idle - checkpoint - storage_stall - fabric_degraded - startup - teardown AS rest,
               ifNull(rt.hourly_rate, 0.) AS rate, ifNull(rt.currency, '') AS currency
        FROM facts AS f
        LEFT JOIN phases AS p ON p.cluster = f.cluster AND p.scheduler = f.scheduler AND p.job_id = f.job_id
                             AND p.attempt = f.attempt
        LEFT JOIN checkpoint_cover AS c1 ON c1.cluster = f.cluster AND c1.job_id = f.job_id
                                        AND c1.c_attempt = f.attempt AND c1.window_start = f.window_start
        LEFT JOIN checkpoint_cover AS c0 ON c0.cluster = f.cluster AND c0.job_id = f.job_id AND c0.c_attempt = 0
                                        AND c0.window_start = f.window_start
        LEFT JOIN storage_cover AS st ON st.cluster = f.cluster AND st.node = f.node AND st.window_start = f.window_start
        LEFT JOIN fabric_cover AS fb ON fb.cluster = f.cluster AND fb.node = f.node AND fb.window_start = f.window_start
        ASOF LEFT JOIN (SELECT DISTINCT cluster, effective_from FROM rates) AS v
            ON v.cluster = f.cluster AND f.window_start >= v.effective_from
        LEFT JOIN rates AS rt ON rt.cluster = f.cluster AND rt.effective_from = v.effective_from
                             AND rt.gpu_model = f.gpu_model
    )
SELECT key, cause, sum(seconds) / 3600 AS idle_gpu_hours, round(sum(seconds * rate) / 3600, 6) AS cost,
       max(currency) AS currency
FROM split
ARRAY JOIN
    ['checkpoint', 'storage_stall', 'fabric_degraded', 'startup', 'teardown', 'idle', 'unobserved'] AS cause,
    [checkpoint, storage_stall, fabric_degraded, startup, teardown, rest, unobserved] AS seconds
GROUP BY key, cause
ORDER BY key, indexOf(['checkpoint', 'storage_stall', 'fabric_degraded', 'startup', 'teardown', 'idle',
                       'unobserved'], cause)
