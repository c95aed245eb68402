"""The config sensor: configs dropped into the inbox folder become partitions, then builds
(a classifier config: its partition, then its training; a mixture config: its sample index)."""

import json
from pathlib import Path

import dagster as dg

from corpus_assets.core.config import load_config
from corpus_assets.core.errors import CorpusError, TransientError
from corpus_assets.core.stages.preflight import preflight
from corpus_assets.core.store import classifier_registry, mixture_registry
from corpus_assets.core.store.sources import link_out_of
from corpus_assets.jobs import (
    BUILD_JOB,
    CLASSIFIER_JOB,
    MIXTURE_JOB,
    classifier_train,
    corpus_build,
    mixture_build,
)
from corpus_assets.resources.classifier_configs import register_checked
from corpus_assets.resources.configs import ConfigStore
from corpus_assets.resources.partitions import CLASSIFIER_CONFIGS, CORPUS_CONFIGS, MIXTURE_CONFIGS
from corpus_assets.resources.paths import CorpusPaths

CONFIG_SUFFIXES = (".toml", ".json")
PARTITIONS = {
    BUILD_JOB: CORPUS_CONFIGS,
    CLASSIFIER_JOB: CLASSIFIER_CONFIGS,
    MIXTURE_JOB: MIXTURE_CONFIGS,
}


@dg.sensor(
    name="corpus_config_sensor",
    description="Registers each new or changed config dropped into <root>/inbox and requests "
    "one build of it (a classifier config: its training; a mixture config: its index); a "
    "config that fails its pre-flight check is logged and skipped.",
    jobs=[corpus_build, classifier_train, mixture_build],
    minimum_interval_seconds=10,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def corpus_config_sensor(
    context: dg.SensorEvaluationContext, paths: CorpusPaths, configs: ConfigStore
) -> dg.SensorResult | dg.SkipReason:
    """Registers each new or changed config in `<root>/inbox` and requests one build of it.

    A config that fails its pre-flight check is logged in one line and skipped, registering
    nothing; a transient failure (hub unreachable) is looked at again on the next tick.
    """
    inbox = paths.inbox_path()
    if not inbox.is_dir():
        return dg.SkipReason(f"no inbox folder {inbox}")
    seen: dict[str, int] = json.loads(context.cursor) if context.cursor else {}
    current = {p.name: p.stat().st_mtime_ns for p in _configs_in(inbox)}
    new_keys: dict[str, list[str]] = {job: [] for job in PARTITIONS}
    retry: list[str] = []
    requests: list[dg.RunRequest] = []
    for name, mtime in sorted(current.items()):
        if seen.get(name) == mtime:
            continue
        if link_out_of(inbox, [inbox / name]) is not None:
            context.log.warning(
                f"{inbox / name}: not registered: a symbolic link out of the inbox "
                "(the inbox reads only files inside it)"
            )
            continue
        try:
            job, key = _register(inbox / name, paths, configs)
        except CorpusError as exc:
            context.log.warning(f"{inbox / name}: not registered: {exc}")
            if isinstance(exc, TransientError):
                retry.append(name)
            continue
        known = context.instance.has_dynamic_partition(PARTITIONS[job], key)
        if not known and key not in new_keys[job]:
            new_keys[job].append(key)
        requests.append(dg.RunRequest(run_key=key, partition_key=key, job_name=job))
        context.log.info(f"{name}: registered as partition {key}")
    cursor = json.dumps({n: m for n, m in current.items() if n not in retry}, sort_keys=True)
    if not requests:
        context.update_cursor(cursor)
        return dg.SkipReason(f"no new configs in {inbox}")
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[
            dg.AddDynamicPartitionsRequest(partitions_def_name=PARTITIONS[job], partition_keys=keys)
            for job, keys in new_keys.items()
            if keys
        ],
        cursor=cursor,
    )


def _register(config_file: Path, paths: CorpusPaths, configs: ConfigStore) -> tuple[str, str]:
    """Register a corpus, classifier or mixture config: the job that builds it, and its
    partition key."""
    if classifier_registry.is_classifier_config(config_file):
        registered = register_checked(config_file, paths.root_path())
        return CLASSIFIER_JOB, registered.config.partition_key
    if mixture_registry.is_mixture_config(config_file):
        mixture = mixture_registry.register(config_file, paths.root_path())
        return MIXTURE_JOB, mixture.config.partition_key
    preflight(load_config(config_file))
    return BUILD_JOB, configs.register(config_file).config.partition_key


def _configs_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix in CONFIG_SUFFIXES and p.is_file())
