"""Registered mixture configs: `<root>/mixture-configs/<hash12>.json`, found by partition key.

A mixture config is recognised by its keys: a mapping with `components` (a corpus config has
`sources`, a task config `recipe`, a classifier config `positive` and `negative`). The stored copy
is the canonical form, so it hashes to itself, and `<hash12>.origin.json` names the original
file and its folder, so relative component folders still resolve there (`config_base_dir`). A
mixture config with secrets in a component URL is not registered: the registry keeps none, and
object storage reads its credentials from the environment.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from corpus_assets.core.config import ORIGIN_SUFFIX, parse_text
from corpus_assets.core.errors import ConfigError
from corpus_assets.core.mixture_config import (
    MIXTURE_KEY,
    LoadedMixtureConfig,
    load_mixture_config,
)
from corpus_assets.core.store.atomic import write_bytes, write_json

MIXTURE_CONFIGS = "mixture-configs"
PARTITION_KEY = re.compile(MIXTURE_KEY)
SUFFIXES = (".toml", ".json")


@dataclass(frozen=True)
class RegisteredMixture:
    """A mixture config in the registry: its loaded form, where the copy is, whether new."""

    config: LoadedMixtureConfig
    path: Path
    new: bool


def is_mixture_config(path: Path) -> bool:
    """Whether `path` is a mixture config: a TOML or JSON mapping with `components`."""
    if path.suffix not in SUFFIXES:
        return False
    try:
        raw = parse_text(path.read_text(encoding="utf-8"), path.suffix[1:])
    except (OSError, UnicodeDecodeError, ConfigError):
        return False
    return isinstance(raw, dict) and "components" in raw


def register(config_file: Path, root: Path) -> RegisteredMixture:
    """Validate `config_file` and store its canonical form; idempotent; invalid: nothing written."""
    config = load_mixture_config(config_file)
    if config.masked != config.canonical:
        raise ConfigError(
            f"{config_file}: a component URL carries a secret (a password or query value); the "
            "registry keeps none: give object storage its credentials in the environment"
        )
    target = root / MIXTURE_CONFIGS / f"{config.hash12}.json"
    new = not target.exists()
    if not new and target.read_bytes() != config.canonical:
        raise ConfigError(
            f"{target} holds a different mixture config with the same hash prefix "
            f"{config.hash12}; remove it or use another data root"
        )
    if new:
        write_bytes(target, config.canonical)
    origin = {"base_dir": str(config.base_dir), "file": str(Path(config_file).resolve())}
    origin_file = target.with_name(f"{target.stem}{ORIGIN_SUFFIX}")
    if not origin_file.is_file() or json.loads(origin_file.read_bytes()) != origin:
        write_json(origin_file, origin)
    return RegisteredMixture(config=load_mixture_config(target), path=target, new=new)


def path_for(root: Path, partition_key: str) -> Path:
    """The registered config file of `partition_key`; ConfigError if it was never registered."""
    if not PARTITION_KEY.match(partition_key):
        raise ConfigError(
            f"{partition_key!r} is not a mixture partition key; expected <name>-<hash12>"
        )
    path = root / MIXTURE_CONFIGS / f"{partition_key[-12:]}.json"
    if not path.is_file():
        raise ConfigError(
            f"mixture partition {partition_key!r} is not registered under "
            f"{root / MIXTURE_CONFIGS}; run `corpus register CONFIG` with the same --root first"
        )
    return path


def load(root: Path, partition_key: str) -> LoadedMixtureConfig:
    """The registered config of `partition_key`, checked to really be that partition."""
    config = load_mixture_config(path_for(root, partition_key))
    if config.partition_key != partition_key:
        raise ConfigError(
            f"registered mixture config {config.hash12} is partition "
            f"{config.partition_key!r}, not {partition_key!r}"
        )
    return config
