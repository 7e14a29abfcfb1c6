-- Every chargeback export of a month, with the newest input change (ns: facts and attempt records
-- of the month) it was made from. An export finding newer inputs than an earlier export of the
-- same month says the closed month changed after it was exported (late data, a late failure).
CREATE TABLE IF NOT EXISTS chargeback_exports
(
    period String,
    exported_at DateTime64(3, 'UTC'),
    input_version UInt64,
    total String,
    paths Array(String)
)
ENGINE = MergeTree
-- read per month, newest last
ORDER BY (period, exported_at);
