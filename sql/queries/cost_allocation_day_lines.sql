-- One day of cost_allocation_daily, line by line (for the checks).
SELECT cluster, term, business_unit, pricing_unit, unit_price, quantity, gpu_hours, cost
FROM cost_allocation_daily
WHERE day = {day:Date}
ORDER BY cluster, term, business_unit
