-- Hourly rates per cluster, GPU model and version (the view current_pricing_rates: the latest
-- ingested event of each version wins whole).
SELECT cluster, effective_from, currency, gpu_model, hourly_rate
FROM current_pricing_rates
ORDER BY cluster, effective_from, gpu_model
