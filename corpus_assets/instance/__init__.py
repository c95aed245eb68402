"""The Dagster instance: its SQLite home under the data root (home.py) or PostgreSQL
(postgres.py), config partitions that concurrent builds add (partitions.py), runs whose process
died (dead_runs.py, processes.py), and what the UI shows after a failure (failures.py)."""
