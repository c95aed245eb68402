"""An export of a partition with nothing to export fails in one sentence, flagged upstream_missing
(what the cleanup sensors read), like every stage."""

from __future__ import annotations

import logging
from pathlib import Path

import dagster as dg

from corpus_assets.assets.exports import corpus_hf
from corpus_assets.build import driver
from corpus_assets.resources.configs import ConfigStore
from corpus_assets.resources.paths import CorpusPaths


def test_corpus_hf_of_an_unbuilt_partition_names_shards_first(
    example: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    key = driver.register(example, root, instance).partition_key
    paths = CorpusPaths(root=str(root))
    run = dg.materialize(
        [corpus_hf],
        partition_key=key,
        instance=instance,
        resources={"paths": paths, "configs": ConfigStore(paths=paths)},
        raise_on_error=False,
    )
    assert not run.success
    failure = run.get_step_failure_events()[0].step_failure_data.user_failure_data
    assert failure is not None and failure.description is not None
    assert failure.description.startswith("materialize shards first: no shards manifest at ")
    assert failure.metadata["upstream_missing"].value is True
    assert failure.metadata["exit_code"].value == 64
    errors = [e.user_message for e in instance.all_logs(run.run_id) if e.level >= logging.ERROR]
    assert errors[0] == failure.description  # the run page's first ERROR is the sentence
    assert not (root / "exports").exists()
