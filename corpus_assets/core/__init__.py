"""Pure stage logic: config, hashing, sources, filters, dedup, PII, writers, manifests.

Nothing in this package imports Dagster.
"""
