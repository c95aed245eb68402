"""Fault-tolerance fixtures: the example config, a data root and a real instance on disk."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dagster"))
from dagster_support import example, instance, root

__all__ = ["example", "instance", "root"]
