"""Example task recipes: domain code the task executor drives (no Dagster import)."""
