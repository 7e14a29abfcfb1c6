-- Nodes whose attribution failed on their own input (e.g. a stored allocation today's contract
-- rejects): the others go on, this one waits for new input. One row per change of state; the
-- newest version per node is in force, and an empty reason means the node computes again.
CREATE TABLE IF NOT EXISTS attribution_quarantine
(
    cluster LowCardinality(String),
    node LowCardinality(String),
    version UInt64,
    reason String,
    -- the node's newest activity seq when it failed: it is tried again once newer input arrives
    input_seq UInt64,
    since DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (cluster, node);

-- Dead letters re-driven by `gpuledger dlq replay`: which letter, when, and as which event
-- (a letter replayed once is not replayed again unless asked).
CREATE TABLE IF NOT EXISTS dead_letter_replays
(
    id String,
    replayed_at DateTime64(3, 'UTC'),
    event_id String
)
ENGINE = ReplacingMergeTree(replayed_at)
ORDER BY id;

-- Rebuilds of the hourly rollup an org mapping version asked for (from its start on, for the
-- cluster it applies to; '' = every cluster). The raw sink only records the request; the stream
-- worker works it off a bounded number of days per attribution step, recording how far it got.
CREATE TABLE IF NOT EXISTS rollup_rebuilds
(
    cluster LowCardinality(String),
    requested UInt64,
    since DateTime64(3, 'UTC'),
    done_until DateTime64(3, 'UTC'),
    finished UInt8,
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (cluster, requested);
