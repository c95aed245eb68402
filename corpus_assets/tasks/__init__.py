"""Task datasets: recipes generate candidate tasks with private references; the executor cleans,
deduplicates, (calibrates,) selects and publishes a verified snapshot. No Dagster import."""
