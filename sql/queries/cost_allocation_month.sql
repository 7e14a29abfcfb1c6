-- Every cost line of the days in [start, end) (dates), for the monthly roll-ups.
SELECT cluster, currency, term, business_unit, team, model, gpu_model, price_from, unit_price, pricing_unit,
       quantity, consumed_quantity, consumed_unit, basis, cost, gpu_hours, busy_gpu_hours, idle_gpu_hours,
       failure_waste_gpu_hours, energy_kwh, energy_cost, carbon_kg
FROM cost_allocation_daily
WHERE day >= {start:Date} AND day < {end:Date}
ORDER BY cluster, day, term, business_unit, team, model, gpu_model, price_from
