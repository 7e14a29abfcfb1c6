-- Workload outputs name their job's scheduler (the owner is the job's: docs/ATTRIBUTION.md
-- "Outputs"), the interval they were produced in, and what the server calls its model.
ALTER TABLE workload_outputs ADD COLUMN IF NOT EXISTS scheduler LowCardinality(String) DEFAULT '' AFTER cluster;
ALTER TABLE workload_outputs ADD COLUMN IF NOT EXISTS started DateTime64(3, 'UTC') DEFAULT time AFTER time;
ALTER TABLE workload_outputs ADD COLUMN IF NOT EXISTS model_name String DEFAULT '';
