-- The newest input change (wall-clock ns) of facts and attempt records: where the late-data
-- sensor starts watching.
SELECT greatest((SELECT max(version) FROM fact_windows), (SELECT max(version) FROM job_attempts)) AS latest
