"""Registered task-job configs: `<root>/task-configs/<hash12>.json`, found by partition key.

A task config is recognised by its `recipe` key. Registering validates it whole before anything
is written: the model, the declared files, the recipe factory (imported and built) and the
calibration factory (imported and built). The stored copy is the raw config as canonical JSON
(its `execution` table included: how the job runs may change between registrations, what it
publishes may not), with `<hash12>.origin.json` naming the folder the original was in, so its
relative paths still resolve there. The partition key is `<name>-<hash12>` and the job folder
`<root>/tasks/<name>/<hash12>/`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from corpus_assets.core.config import ORIGIN_SUFFIX, canon
from corpus_assets.core.errors import ConfigError
from corpus_assets.core.store.atomic import write_bytes, write_json
from corpus_assets.tasks.config import SUFFIXES, LoadedJobConfig, load_job_config, parse_job_text

TASK_CONFIGS = "task-configs"
TASKS = "tasks"
PARTITION_KEY = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}-[0-9a-f]{12}$")


@dataclass(frozen=True)
class RegisteredJob:
    """A task config in the registry: its loaded form, where the copy is, whether it is new."""

    config: LoadedJobConfig
    path: Path
    new: bool


def is_task_config(path: Path) -> bool:
    """Whether `path` is a task-job config (a YAML, TOML or JSON mapping with `recipe`)."""
    fmt = SUFFIXES.get(path.suffix)
    if fmt is None:
        return False
    try:
        raw = parse_job_text(path.read_text(encoding="utf-8"), fmt)
    except (OSError, UnicodeDecodeError, ConfigError):
        return False
    return isinstance(raw, dict) and "recipe" in raw


def check_buildable(config: LoadedJobConfig, root: Path | None = None) -> None:
    """Build the recipe and the calibrator once, as the job will: a bad factory fails here;
    corpus-build inputs must be registered configs under `root` (built later is fine)."""
    from corpus_assets.tasks import corpus_inputs
    from corpus_assets.tasks.calibrate import build_calibrator
    from corpus_assets.tasks.workers import RecipeSpec

    corpus_inputs.check_registered(config.model.corpus_inputs, root)
    RecipeSpec(config.model.recipe, dict(config.model.params)).build()
    if config.model.calibration is not None:
        build_calibrator(config.model.calibration, config.base_dir)


def job_folder(root: Path, config: LoadedJobConfig) -> Path:
    """`<root>/tasks/<name>/<hash12>/`: the job's folder (checkpoints, snapshot)."""
    return root / TASKS / config.name / config.hash12


def register_job(config_file: Path, root: Path) -> RegisteredJob:
    """Validate `config_file` whole and store it; idempotent; invalid: nothing written."""
    config = load_job_config(config_file)
    check_buildable(config, root)
    target = root / TASK_CONFIGS / f"{config.hash12}.json"
    data = canon(config.raw)
    new = not target.exists()
    if not new:
        stored = load_job_config(target)
        if stored.sha256 != config.sha256:
            raise ConfigError(
                f"{target} holds a different task config with the same hash prefix "
                f"{config.hash12}; remove it or use another data root"
            )
    if new or target.read_bytes() != data:
        write_bytes(target, data)
    origin = {"base_dir": str(config.base_dir), "file": str(Path(config_file).resolve())}
    origin_file = target.with_name(f"{target.stem}{ORIGIN_SUFFIX}")
    if _read(origin_file) != origin:
        write_json(origin_file, origin)
    return RegisteredJob(load_job_config(target), target, new)


def path_for(root: Path, partition_key: str) -> Path:
    """The registered config of a task partition; ConfigError if it was never registered."""
    if not PARTITION_KEY.match(partition_key):
        raise ConfigError(
            f"{partition_key!r} is not a task partition key; expected <name>-<hash12>"
        )
    path = root / TASK_CONFIGS / f"{partition_key[-12:]}.json"
    if not path.is_file():
        raise ConfigError(
            f"task partition {partition_key!r} is not registered under {root / TASK_CONFIGS}; "
            "run `corpus register CONFIG` with the same --root first"
        )
    return path


def load(root: Path, partition_key: str) -> LoadedJobConfig:
    """The registered config of `partition_key`, checked to really be that partition."""
    config = load_job_config(path_for(root, partition_key))
    if config.partition_key != partition_key:
        raise ConfigError(
            f"registered task config {config.hash12} is partition {config.partition_key!r}, "
            f"not {partition_key!r}"
        )
    return config


def _read(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
