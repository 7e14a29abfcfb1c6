-- The cost of a unit of output per owner group (docs/ATTRIBUTION.md "Outputs"): every cost line of
-- the group's owners (compute, retries, its share of idle capacity and of the shared costs, as the
-- daily cost assets computed them) over the UTC days the range [start, end) touches, divided by
-- the outputs of unit {unit} (or of the units {unit}_*: 'tokens' takes tokens_generated and
-- tokens_prompt) its jobs reported in those days; per million units, and beside it the cost per
-- successful run. A job's owner is the one its allocated facts carry (the latest in the days before
-- the range's end); outputs of a job no fact names belong to 'unassigned'. The group is chosen by
-- {by} (business_unit, team, model, cluster), a parameter, never spliced into the text.
WITH
    splitByChar(',', {by:String}) AS dims,
    toDate({start:DateTime64(3, 'UTC')}) AS first_day,
    toDate({end:DateTime64(3, 'UTC')} - toIntervalMillisecond(1)) AS last_day,
    toDateTime64(first_day, 3, 'UTC') AS from_time,
    toDateTime64(last_day + 1, 3, 'UTC') AS to_time,
    owners AS
    (
        SELECT cluster, scheduler, job_id, argMax(business_unit, window_start) AS business_unit,
               argMax(team, window_start) AS team, argMax(model, window_start) AS model
        FROM resolved_facts
        WHERE kind = 'allocated' AND window_start >= from_time - toIntervalDay(31) AND window_start < to_time
          AND ({cluster:String} = '' OR cluster = {cluster:String})
        GROUP BY cluster, scheduler, job_id
    )
SELECT
    arrayStringConcat(arrayMap(d -> multiIf(d = 'team', team, d = 'business_unit', business_unit,
                                            d = 'model', model, d = 'cluster', toString(cluster), 'all'), dims),
                      '\x1F') AS key,
    max(currency) AS currency,
    sum(quantity) AS units,
    toDecimal64(round(sum(amount), 2), 2) AS cost,  -- to the cent (a conversion alone would cut)
    if(sum(quantity) > 0, round(toFloat64(sum(amount)) / sum(quantity) * 1000000, 6), NULL) AS cost_per_million_units,
    sum(runs) AS successful_runs,
    if(sum(runs) > 0, round(toFloat64(sum(amount)) / sum(runs), 6), NULL) AS cost_per_successful_run
FROM
(
    SELECT cluster, business_unit, team, model, any(currency) AS currency, sum(cost) AS amount, 0.0 AS quantity,
           toUInt64(0) AS runs
    FROM cost_allocation_daily
    WHERE day >= first_day AND day <= last_day AND business_unit != '__platform__'
      AND ({cluster:String} = '' OR cluster = {cluster:String})
    GROUP BY cluster, business_unit, team, model
    UNION ALL
    SELECT o.cluster, if(w.team = '', 'unassigned', w.business_unit), if(w.team = '', 'unassigned', w.team),
           if(w.team = '', 'unknown', w.model), '', toDecimal128(0, 12), sum(o.quantity), toUInt64(0)
    FROM
    (
        SELECT cluster, scheduler, job_id, quantity
        FROM workload_outputs FINAL
        WHERE time >= from_time AND time < to_time
          AND (unit = {unit:String} OR startsWith(unit, concat({unit:String}, '_')))
          AND ({cluster:String} = '' OR cluster = {cluster:String})
    ) AS o
    LEFT JOIN owners AS w ON w.cluster = o.cluster AND w.scheduler = o.scheduler AND w.job_id = o.job_id
    GROUP BY o.cluster, w.business_unit, w.team, w.model
    UNION ALL
    SELECT a.cluster, w.business_unit, w.team, w.model, '', toDecimal128(0, 12), 0.0,
           uniqExact(a.scheduler, if(a.logical_job = '', a.job_id, a.logical_job))
    FROM
    (
        SELECT cluster, scheduler, job_id, logical_job
        FROM job_attempts FINAL
        WHERE outcome = 'success' AND end_time >= from_time AND end_time < to_time
          AND ({cluster:String} = '' OR cluster = {cluster:String})
    ) AS a
    INNER JOIN owners AS w ON w.cluster = a.cluster AND w.scheduler = a.scheduler AND w.job_id = a.job_id
    GROUP BY a.cluster, w.business_unit, w.team, w.model
)
GROUP BY key
ORDER BY sum(amount) DESC, key
