"""Dagster wiring: assets."""
