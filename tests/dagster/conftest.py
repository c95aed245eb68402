"""Dagster test fixtures: a private copy of the example config, a data root, an instance."""

from dagster_support import example, instance, root

__all__ = ["example", "instance", "root"]
