-- Business units named by any org mapping version in force before {end}.
SELECT DISTINCT value AS business_unit
FROM org_mapping_rows
WHERE kind = 'team_business_unit' AND effective_from < {end:DateTime64(3, 'UTC')} AND value != ''
ORDER BY business_unit
