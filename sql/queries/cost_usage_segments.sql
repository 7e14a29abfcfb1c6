-- GPU-seconds of [start, end) per cluster, GPU model, rate segment, kind and owner, for pricing.
-- A window's segment is the latest price boundary at or before its start ({bounds}: every rate
-- version's effective_from; 1970-01-01 when none applies yet). lost_seconds: failed attempts'
-- GPU-seconds held after their last completed checkpoint (the work a retry redoes), as
-- failed_facts computes them (the checkpoint's own window counts its part after the checkpoint).
-- energy_joules: the energy of those GPU-seconds.
SELECT g.cluster AS cluster, g.gpu_model AS gpu_model, g.segment_start AS segment_start, g.kind AS kind,
       g.business_unit_ AS business_unit, g.team_ AS team, g.model_ AS model, g.gpu_seconds AS gpu_seconds,
       g.busy_seconds AS busy_seconds, g.unobserved_seconds AS unobserved_seconds, ifNull(l.lost, 0.0) AS lost_seconds,
       g.energy_joules AS energy_joules
FROM
(
    SELECT
        cluster, gpu_model,
        arrayMax(arrayFilter(b -> b <= window_start,
                             arrayPushFront({bounds:Array(DateTime64(3, 'UTC'))}, toDateTime64(0, 3, 'UTC')))) AS segment_start,
        kind,
        if(kind = 'allocated', business_unit, '') AS business_unit_,
        if(kind = 'allocated', team, '') AS team_,
        if(kind = 'allocated', model, '') AS model_,
        sum(gpu_seconds) AS gpu_seconds,
        sum(busy_seconds) AS busy_seconds,
        sum(unobserved_seconds) AS unobserved_seconds,
        sum(energy_joules) AS energy_joules
    FROM resolved_facts
    WHERE window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
    GROUP BY cluster, gpu_model, segment_start, kind, business_unit_, team_, model_
) AS g
LEFT JOIN
(
    SELECT
        cluster AS l_cluster, gpu_model AS l_gpu_model,
        arrayMax(arrayFilter(b -> b <= window_start,
                             arrayPushFront({bounds:Array(DateTime64(3, 'UTC'))}, toDateTime64(0, 3, 'UTC')))) AS l_segment,
        business_unit AS l_business_unit, team AS l_team, model AS l_model, sum(lost_seconds) AS lost
    FROM failed_facts
    WHERE window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}
    GROUP BY l_cluster, l_gpu_model, l_segment, l_business_unit, l_team, l_model
) AS l ON g.kind = 'allocated' AND l.l_cluster = g.cluster AND l.l_gpu_model = g.gpu_model
      AND l.l_segment = g.segment_start AND l.l_business_unit = g.business_unit_ AND l.l_team = g.team_
      AND l.l_model = g.model_
ORDER BY cluster, gpu_model, segment_start, kind, business_unit, team, model
