-- One month of the capacity plan.
SELECT cluster, gpu_model, availability, allocation, success, busy, useful_work_per_gpu_month, target_work,
       required_gpus, installed_gpus, additional_gpus
FROM capacity_plan
WHERE month = {month:Date}
ORDER BY cluster, gpu_model
