"""The config registry: canonical configs under `<root>/configs/`, found again by partition key.

`<hash12>.json` holds the canonical form (so it hashes to itself); `<hash12>.origin.json` records
the original file and its folder, so relative source paths still resolve there. A config with
secrets in its source URLs (query values, a password) is kept with them masked
(`core/secrets.py`): it no longer hashes to itself, and loading it reads the original file
again, which must still be the same config (a ConfigError else).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from corpus_assets.core.config import ORIGIN_SUFFIX, LoadedConfig, load_config
from corpus_assets.core.errors import ConfigError
from corpus_assets.core.secrets import has_masks
from corpus_assets.core.store.atomic import write_bytes, write_json
from corpus_assets.core.store.layout import Layout

PARTITION_KEY = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}-[a-z0-9][a-z0-9._-]{0,63}-[0-9a-f]{12}$")


@dataclass(frozen=True)
class Registered:
    """A config in the registry: where its canonical copy is and what it identifies."""

    config: LoadedConfig
    path: Path
    new: bool


def origin_path(config_file: Path) -> Path:
    return config_file.with_name(f"{config_file.stem}{ORIGIN_SUFFIX}")


def register(config_file: Path, layout: Layout) -> Registered:
    """Validate `config_file` and store its canonical form; idempotent; invalid: nothing written."""
    cfg = load_config(config_file)
    target = layout.config_file(cfg)
    new = not target.exists()
    if not new and target.read_bytes() != cfg.masked:
        raise ConfigError(
            f"{target} holds a different config with the same hash prefix {cfg.hash12}; "
            "remove it or use another data root"
        )
    if new:
        write_bytes(target, cfg.masked)
    origin = {"base_dir": str(cfg.base_dir), "file": str(Path(config_file).resolve())}
    if _read_origin(origin_path(target)) != origin:
        write_json(origin_path(target), origin)
    return Registered(config=load_config(target), path=target, new=new)


def path_for(layout: Layout, partition_key: str) -> Path:
    """The registered config file of `partition_key`; ConfigError if it was never registered."""
    if not PARTITION_KEY.match(partition_key):
        raise ConfigError(
            f"{partition_key!r} is not a corpus partition key; "
            "expected <dataset>-<version>-<hash12>"
        )
    path = layout.configs / f"{partition_key[-12:]}.json"
    if not path.is_file():
        raise ConfigError(
            f"partition {partition_key!r} is not registered under {layout.configs}; "
            "run `corpus register CONFIG` with the same --root first"
        )
    return path


def load(layout: Layout, partition_key: str) -> LoadedConfig:
    """The registered config of `partition_key`, checked to really be that partition."""
    cfg = load_config(path_for(layout, partition_key))
    if cfg.partition_key != partition_key:
        raise ConfigError(
            f"registered config {cfg.hash12} is partition {cfg.partition_key!r}, not "
            f"{partition_key!r}"
        )
    return cfg


def partition_keys(layout: Layout) -> list[str]:
    """Every registered partition key, sorted."""
    if not layout.configs.is_dir():
        return []
    keys = []
    for path in sorted(layout.configs.glob("*.json")):
        if path.name.endswith(ORIGIN_SUFFIX):
            continue
        keys.append(_key_of(path))
    return sorted(keys)


def _key_of(path: Path) -> str:
    """The partition key of a registered file; one with masked secrets is not read again."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raw = None
    if isinstance(raw, dict) and has_masks(raw):
        return f"{raw.get('dataset')}-{raw.get('version')}-{path.stem}"
    return load_config(path).partition_key


def _read_origin(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # missing or corrupt (not JSON, not UTF-8): written again
        return None
