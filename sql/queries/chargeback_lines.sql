-- One month's chargeback lines (cents), every business unit and the platform's remainder.
SELECT cluster, currency, term, business_unit, team, model, gpu_model, price_from, unit_price, pricing_unit,
       quantity, consumed_quantity, consumed_unit, basis, exact_cost, cost, gpu_hours, busy_gpu_hours,
       idle_gpu_hours, failure_waste_gpu_hours, energy_kwh, energy_cost, carbon_kg
FROM chargeback_monthly
WHERE month = {month:Date}
ORDER BY cluster, business_unit, term, team, model, gpu_model, price_from
