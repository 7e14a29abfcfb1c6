-- Physical capacity GPU-seconds per cluster in [start, end), from the node's inventory, not from what
-- the attribution wrote: fact_windows.physical_gpus holds what was claimed on a node whose GPUs the
-- attribution did not know (and counts a GPU only a placement names), so over-allocation would pass
-- by construction. For every written (node, window): the larger of the GPU count the node's latest
-- node.state before the window's end declares and the number of GPUs it reported (gpu_inventory)
-- from the inventory horizon (24 h) before the window until its end, × the window. A window of a
-- node with neither has no inventory: it adds no capacity and is counted, its node named, in
-- windows_without_inventory / nodes_without_inventory (docs/ATTRIBUTION.md "Capacity check").
WITH
    windows AS
    (
        SELECT cluster, node, window_start, argMax(window_seconds, version) AS seconds,
               window_start + toIntervalSecond(seconds) AS window_end
        FROM fact_windows
        WHERE window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
        GROUP BY cluster, node, window_start
    ),
    declared AS
    (
        SELECT cluster, node, time, JSONExtract(payload, 'gpus', 'Nullable(Int64)') AS gpus
        FROM raw_scheduler_allocations FINAL
        WHERE type = 'node.state' AND job_id = '' AND time < {end:DateTime64(3, 'UTC')} + INTERVAL 1 DAY
          AND JSONExtract(payload, 'gpus', 'Nullable(Int64)') IS NOT NULL
    ),
    -- per GPU, its hours' first and last sample: a sample lies in [window start − 24 h, window end)
    -- exactly when some hour's span meets it (an hour is shorter than the interval)
    seen AS
    (
        SELECT cluster, node, uuid, groupArray(first_time) AS firsts, groupArray(last_time) AS lasts
        FROM
        (
            SELECT cluster, node, hour, uuid, min(first_time) AS first_time, max(last_time) AS last_time
            FROM gpu_inventory
            WHERE hour >= toStartOfHour({start:DateTime64(3, 'UTC')} - INTERVAL 1 DAY)
              AND hour < {end:DateTime64(3, 'UTC')} + INTERVAL 1 HOUR
            GROUP BY cluster, node, hour, uuid
        )
        GROUP BY cluster, node, uuid
    ),
    inventory AS
    (
        SELECT w.cluster AS cluster, w.node AS node, w.window_start AS window_start,
               any(w.seconds) AS window_s, any(w.gpus) AS declared_gpus,
               countIf(s.uuid != '' AND arrayExists((f, l) -> f < w.window_end
                                                    AND l >= w.window_start - INTERVAL 1 DAY, s.firsts, s.lasts))
                   AS seen_gpus
        FROM
        (
            SELECT w.cluster AS cluster, w.node AS node, w.window_start AS window_start,
                   w.seconds AS seconds, w.window_end AS window_end, d.gpus AS gpus
            FROM windows AS w
            ASOF LEFT JOIN declared AS d ON d.cluster = w.cluster AND d.node = w.node AND w.window_end > d.time
        ) AS w
        LEFT JOIN seen AS s ON s.cluster = w.cluster AND s.node = w.node
        GROUP BY cluster, node, window_start
    )
SELECT cluster,
       sumIf(greatest(ifNull(declared_gpus, 0), seen_gpus) * window_s,
             declared_gpus IS NOT NULL OR seen_gpus > 0) AS capacity_seconds,
       countIf(declared_gpus IS NULL AND seen_gpus = 0) AS windows_without_inventory,
       arraySort(groupUniqArrayIf(node, declared_gpus IS NULL AND seen_gpus = 0)) AS nodes_without_inventory
FROM inventory
GROUP BY cluster
ORDER BY cluster
