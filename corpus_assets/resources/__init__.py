"""Dagster wiring: resources."""
