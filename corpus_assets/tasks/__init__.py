"""Task datasets: recipes generate candidate tasks with private references; the executor cleans,
deduplicates, (calibrates,) selects and publishes a verified snapshot. No Dagster import.

The public API, imported from here: the job config and runner, the snapshot readers, and the
types a recipe or calibrator author needs. Names load on first use, so importing the package
stays cheap (the executor and pydantic load only with `DataJobConfig` or `run_data_job`).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corpus_assets.tasks.calibration import (
        Attempt,
        CalibrationBatch,
        CalibrationContext,
        Calibrator,
    )
    from corpus_assets.tasks.config import DataJobConfig
    from corpus_assets.tasks.export import export_hf_dataset
    from corpus_assets.tasks.ranking import (
        InMemoryRanking,
        RankedCandidate,
        RankedSelection,
        SelectionPolicy,
        select_ranked_candidates,
    )
    from corpus_assets.tasks.run import run_data_job
    from corpus_assets.tasks.snapshot import Snapshot, load_snapshot
    from corpus_assets.tasks.types import (
        DataSample,
        GenerateContext,
        GenerationShard,
        InsufficientDataError,
        PublicTask,
        Purpose,
        Recipe,
        Selection,
        check_score,
    )

_WHERE = {
    "DataJobConfig": "config",
    "run_data_job": "run",
    "Snapshot": "snapshot",
    "load_snapshot": "snapshot",
    "export_hf_dataset": "export",
    "Recipe": "types",
    "PublicTask": "types",
    "DataSample": "types",
    "GenerateContext": "types",
    "GenerationShard": "types",
    "Selection": "types",
    "InsufficientDataError": "types",
    "Purpose": "types",
    "check_score": "types",
    "SelectionPolicy": "ranking",
    "InMemoryRanking": "ranking",
    "RankedCandidate": "ranking",
    "RankedSelection": "ranking",
    "select_ranked_candidates": "ranking",
    "Calibrator": "calibration",
    "Attempt": "calibration",
    "CalibrationBatch": "calibration",
    "CalibrationContext": "calibration",
}

__all__ = [
    "Attempt",
    "CalibrationBatch",
    "CalibrationContext",
    "Calibrator",
    "DataJobConfig",
    "DataSample",
    "GenerateContext",
    "GenerationShard",
    "InMemoryRanking",
    "InsufficientDataError",
    "PublicTask",
    "Purpose",
    "RankedCandidate",
    "RankedSelection",
    "Recipe",
    "Selection",
    "SelectionPolicy",
    "Snapshot",
    "check_score",
    "export_hf_dataset",
    "load_snapshot",
    "run_data_job",
    "select_ranked_candidates",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines `name` on first use."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
