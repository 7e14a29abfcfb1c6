-- First and last window with facts from {since} on, and how many windows (0: nothing to rebuild),
-- for one cluster or every cluster ({cluster} = '').
SELECT min(window_start), max(window_start), count()
FROM fact_windows
WHERE ({cluster:String} = '' OR cluster = {cluster:String}) AND window_start >= {since:DateTime64(3, 'UTC')}
