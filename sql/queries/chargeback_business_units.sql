-- Business units that exist for [{start}, {end}): named by an org mapping version in force at some
-- time in the period (from its effective_from until the next version of its scope), in a scope that
-- applies there: '*' or a cluster with facts in the period. Other clusters' units and units of
-- versions superseded before the period get no export file.
SELECT DISTINCT r.value AS business_unit
FROM org_mapping_rows AS r
INNER JOIN
(
    SELECT cluster, effective_from,
           leadInFrame(effective_from, 1, toDateTime64('2200-01-01 00:00:00', 3, 'UTC'))
               OVER (PARTITION BY cluster ORDER BY effective_from ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING) AS until
    FROM (SELECT DISTINCT cluster, effective_from FROM org_mappings)
) AS v ON v.cluster = r.cluster AND v.effective_from = r.effective_from
WHERE r.kind = 'team_business_unit' AND r.value != ''
  AND v.effective_from < {end:DateTime64(3, 'UTC')} AND v.until > {start:DateTime64(3, 'UTC')}
  AND (r.cluster = '*' OR r.cluster IN (
      SELECT DISTINCT cluster FROM fact_windows
      WHERE window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}))
ORDER BY business_unit
