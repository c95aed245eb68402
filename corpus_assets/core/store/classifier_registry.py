"""Registered classifier configs: `<root>/classifier-configs/<hash12>.json`, found by partition key.

A classifier config is recognised by its keys: a mapping with `positive` and `negative` (a corpus
config has `sources`, a task config `recipe`). The stored copy is the canonical form with URL
secrets masked, and `<hash12>.origin.json` names the original file and its folder, so relative
paths still resolve there (`load_classifier_config` reads both). The partition key is
`<name>-<hash12>`; the trained model goes to `Layout.classifier(key)`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from corpus_assets.core.classifier_config import (
    CLASSIFIER_KEY,
    LoadedClassifierConfig,
    load_classifier_config,
)
from corpus_assets.core.config import ORIGIN_SUFFIX, parse_text
from corpus_assets.core.errors import ConfigError
from corpus_assets.core.store.atomic import write_bytes, write_json

CLASSIFIER_CONFIGS = "classifier-configs"
PARTITION_KEY = re.compile(CLASSIFIER_KEY)
SUFFIXES = (".toml", ".json")


@dataclass(frozen=True)
class RegisteredClassifier:
    """A classifier config in the registry: its loaded form, where the copy is, whether new."""

    config: LoadedClassifierConfig
    path: Path
    new: bool


def is_classifier_config(path: Path) -> bool:
    """Whether `path` is a classifier config: a TOML or JSON mapping with `positive` and
    `negative` (unreadable or invalid files are not; loading them says why)."""
    if path.suffix not in SUFFIXES:
        return False
    try:
        raw = parse_text(path.read_text(encoding="utf-8"), path.suffix[1:])
    except (OSError, UnicodeDecodeError, ConfigError):
        return False
    return isinstance(raw, dict) and "positive" in raw and "negative" in raw


def register(config_file: Path, root: Path) -> RegisteredClassifier:
    """Validate `config_file` and store its canonical form; idempotent; invalid: nothing written."""
    config = load_classifier_config(config_file)
    target = root / CLASSIFIER_CONFIGS / f"{config.hash12}.json"
    new = not target.exists()
    if not new and target.read_bytes() != config.masked:
        raise ConfigError(
            f"{target} holds a different classifier config with the same hash prefix "
            f"{config.hash12}; remove it or use another data root"
        )
    if new:
        write_bytes(target, config.masked)
    origin = {"base_dir": str(config.base_dir), "file": str(Path(config_file).resolve())}
    origin_file = target.with_name(f"{target.stem}{ORIGIN_SUFFIX}")
    if _read_json(origin_file) != origin:
        write_json(origin_file, origin)
    return RegisteredClassifier(config=load_classifier_config(target), path=target, new=new)


def path_for(root: Path, partition_key: str) -> Path:
    """The registered config file of `partition_key`; ConfigError if it was never registered."""
    if not PARTITION_KEY.match(partition_key):
        raise ConfigError(
            f"{partition_key!r} is not a classifier partition key; expected <name>-<hash12>"
        )
    path = root / CLASSIFIER_CONFIGS / f"{partition_key[-12:]}.json"
    if not path.is_file():
        raise ConfigError(
            f"classifier partition {partition_key!r} is not registered under "
            f"{root / CLASSIFIER_CONFIGS}; run `corpus register CONFIG` with the same --root first"
        )
    return path


def load(root: Path, partition_key: str) -> LoadedClassifierConfig:
    """The registered config of `partition_key`, checked to really be that partition."""
    config = load_classifier_config(path_for(root, partition_key))
    if config.partition_key != partition_key:
        raise ConfigError(
            f"registered classifier config {config.hash12} is partition "
            f"{config.partition_key!r}, not {partition_key!r}"
        )
    return config


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # missing or corrupt: written again
        return None
