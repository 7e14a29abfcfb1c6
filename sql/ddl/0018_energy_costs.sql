-- Energy beside the money (docs/ATTRIBUTION.md "Energy"): a price version may say what a kWh costs
-- and emits; every cost line carries the kWh of its GPU-seconds and, where the version gives
-- them, their cost (a part of the GPU-hour rate, not billed again) and emissions. NULL: not given.
ALTER TABLE pricing_shared ADD COLUMN IF NOT EXISTS energy_per_kwh Nullable(Decimal(18, 6));
ALTER TABLE pricing_shared ADD COLUMN IF NOT EXISTS carbon_g_per_kwh Nullable(Float64);
ALTER TABLE cost_allocation_daily ADD COLUMN IF NOT EXISTS energy_kwh Float64 DEFAULT 0;
ALTER TABLE cost_allocation_daily ADD COLUMN IF NOT EXISTS energy_cost Nullable(Decimal(38, 12));
ALTER TABLE cost_allocation_daily ADD COLUMN IF NOT EXISTS carbon_kg Nullable(Float64);
ALTER TABLE chargeback_monthly ADD COLUMN IF NOT EXISTS energy_kwh Float64 DEFAULT 0;
ALTER TABLE chargeback_monthly ADD COLUMN IF NOT EXISTS energy_cost Nullable(Decimal(38, 12));
ALTER TABLE chargeback_monthly ADD COLUMN IF NOT EXISTS carbon_kg Nullable(Float64);
