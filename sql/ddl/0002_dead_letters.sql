-- Everything that failed validation, kept whole with its reason (also on <topic>.dlq in Kafka).
CREATE TABLE IF NOT EXISTS dead_letters
(
    id String,
    topic LowCardinality(String),
    source LowCardinality(String),
    reason String,
    raw String CODEC(ZSTD(3)),
    origin String,
    time DateTime64(3, 'UTC'),
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(time)
-- per-topic counts for `gpuledger status`; id (content hash) dedupes re-ingested garbage
ORDER BY (topic, id);
