-- Hourly rates per cluster, GPU model and version: of several events for the same version
-- (cluster, effective_from), the latest ingested one wins whole.
SELECT DISTINCT r.cluster AS cluster, r.effective_from AS effective_from, r.currency AS currency,
       r.gpu_model AS gpu_model, r.hourly_rate AS hourly_rate
FROM pricing_rates AS r
INNER JOIN
(
    SELECT cluster, effective_from, argMax(event_id, ingested_at) AS latest
    FROM pricing_rates
    GROUP BY cluster, effective_from
) AS l ON l.cluster = r.cluster AND l.effective_from = r.effective_from AND l.latest = r.event_id
ORDER BY cluster, effective_from, gpu_model
