-- Monthly shared costs and the idle policy per cluster and version (latest ingested event wins).
SELECT
    cluster, effective_from,
    argMax(currency, ingested_at) AS currency,
    argMax(network, ingested_at) AS network,
    argMax(storage, ingested_at) AS storage,
    argMax(support, ingested_at) AS support,
    argMax(operations, ingested_at) AS operations,
    argMax(idle_policy, ingested_at) AS idle_policy,
    argMax(energy_per_kwh, ingested_at) AS energy_per_kwh,
    argMax(carbon_g_per_kwh, ingested_at) AS carbon_g_per_kwh
FROM pricing_shared
GROUP BY cluster, effective_from
ORDER BY cluster, effective_from
