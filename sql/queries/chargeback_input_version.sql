-- The newest input change (wall-clock ns) of the month [start, end): a facts write of one of its
-- windows, or an attempt record whose run overlaps it; and the previous exports' newest input.
SELECT
    greatest(
        (SELECT max(version) FROM fact_windows
         WHERE window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')}),
        (SELECT max(version) FROM job_attempts
         WHERE start_time < {end:DateTime64(3, 'UTC')} AND ifNull(end_time, start_time) >= {start:DateTime64(3, 'UTC')})
    ) AS latest,
    (SELECT max(input_version) FROM chargeback_exports WHERE period = {period:String}) AS exported,
    (SELECT max(exported_at) FROM chargeback_exports WHERE period = {period:String}) AS exported_at
