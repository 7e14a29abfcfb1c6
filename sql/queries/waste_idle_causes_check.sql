-- idle_causes_daily of one day against the facts: per cluster, node, team, business unit and model
-- the causes (unobserved aside) sum to the allocated idle GPU-seconds, gpu − busy − unobserved, as
-- report gpu-hours counts them. The groups off by more than {tolerance_s} seconds, and the worst.
SELECT countIf(abs(c.idle - f.idle) > {tolerance_s:Float64}) AS bad, max(abs(c.idle - f.idle)) AS worst,
       sum(f.idle) AS facts_idle, sum(c.idle) AS causes_idle
FROM
(
    SELECT toString(cluster) AS cluster, toString(node) AS node, toString(team) AS team,
           toString(business_unit) AS business_unit, toString(model) AS model,
           sumIf(idle_seconds, cause != 'unobserved') AS idle
    FROM idle_causes_daily
    WHERE day = {day:Date}
    GROUP BY cluster, node, team, business_unit, model
) AS c
FULL OUTER JOIN
(
    SELECT toString(cluster) AS cluster, toString(node) AS node, toString(team) AS team,
           toString(business_unit) AS business_unit, toString(model) AS model,
           sum(gpu_seconds - busy_seconds - unobserved_seconds) AS idle
    FROM resolved_facts
    WHERE kind = 'allocated' AND window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
    GROUP BY cluster, node, team, business_unit, model
) AS f USING (cluster, node, team, business_unit, model)
