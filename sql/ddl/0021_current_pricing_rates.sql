-- The hourly rates in force per cluster, GPU model and price version: of several events for the
-- same version (cluster, effective_from), the latest ingested one wins whole; one row per version
-- and GPU model even before the table's duplicate events are merged away.
CREATE VIEW IF NOT EXISTS current_pricing_rates AS
SELECT DISTINCT r.cluster AS cluster, r.effective_from AS effective_from, r.currency AS currency,
       r.gpu_model AS gpu_model, r.hourly_rate AS hourly_rate
FROM pricing_rates AS r
INNER JOIN
(
    SELECT cluster, effective_from, argMax(event_id, ingested_at) AS latest
    FROM pricing_rates
    GROUP BY cluster, effective_from
) AS l ON l.cluster = r.cluster AND l.effective_from = r.effective_from AND l.latest = r.event_id;
