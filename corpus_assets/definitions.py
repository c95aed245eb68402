"""The one composition root: assets, checks, jobs, sensors and resources of the corpus graph.

`defs` is what `dagster dev`, `dagster job execute -m corpus_assets.definitions` and workspace.yaml
load. `build_defs` makes the same graph with other resources (a data root, a stage runner with
short timeouts): `corpus build` and the tests use it instead of patching anything.
"""

from __future__ import annotations

import dagster as dg

from corpus_assets.assets import checks, quality_model_checks, task_checks
from corpus_assets.assets.exports import corpus_hf, task_hf
from corpus_assets.assets.mixture import mixture
from corpus_assets.assets.quality_model import quality_model
from corpus_assets.assets.raw import raw
from corpus_assets.assets.report import report
from corpus_assets.assets.shards import shards
from corpus_assets.assets.task_dataset import task_dataset
from corpus_assets.assets.token_exports import token_exports
from corpus_assets.assets.tokens import tokens
from corpus_assets.jobs import JOBS
from corpus_assets.resources.classifier_configs import ClassifierConfigStore
from corpus_assets.resources.configs import ConfigStore
from corpus_assets.resources.mixture_configs import MixtureConfigStore
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.resources.stage_runner import StageRunner
from corpus_assets.resources.task_configs import TaskConfigStore
from corpus_assets.sensors.cleanup import corpus_cleanup_on_cancel, corpus_cleanup_on_failure
from corpus_assets.sensors.config import corpus_config_sensor
from corpus_assets.sensors.dead_runs import corpus_dead_runs

OWNERS = ["team:corpus"]
"""Who answers for every asset (the UI's Owner filter and each asset's page)."""


def build_defs(
    paths: CorpusPaths | None = None, stage_runner: StageRunner | None = None
) -> dg.Definitions:
    """The corpus graph bound to `paths` (default: root from the environment at run time)."""
    paths = paths or CorpusPaths()
    assets = [
        raw,
        shards,
        tokens,
        report,
        task_dataset,
        corpus_hf,
        task_hf,
        quality_model,
        token_exports,
        mixture,
    ]
    return dg.Definitions(
        assets=dg.map_asset_specs(lambda spec: spec.replace_attributes(owners=OWNERS), assets),
        asset_checks=[
            *checks.ALL_CHECKS,
            task_checks.task_dataset_checks,
            quality_model_checks.quality_model_checks,
        ],
        jobs=list(JOBS),
        sensors=[
            corpus_config_sensor,
            corpus_cleanup_on_failure,
            corpus_cleanup_on_cancel,
            corpus_dead_runs,
        ],
        # Every step already runs its stage in a subprocess; the multiprocess executor would add
        # a worker start-up (~2 s) per step, also for runs launched from the UI (__ASSET_JOB).
        executor=dg.in_process_executor,
        resources={
            "paths": paths,
            "configs": ConfigStore(paths=paths),
            "task_configs": TaskConfigStore(paths=paths),
            "classifier_configs": ClassifierConfigStore(paths=paths),
            "mixture_configs": MixtureConfigStore(paths=paths),
            "stage_runner": stage_runner or StageRunner(),
        },
    )


defs = build_defs()
