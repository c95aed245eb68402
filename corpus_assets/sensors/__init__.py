"""Dagster wiring: sensors."""
