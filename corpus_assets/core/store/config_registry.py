"""A registry of one kind of config: `<root>/<folder>/<hash12>.json`, found by partition key.

A config of the kind is recognised by its top-level keys (a corpus config has `sources`, a task
config `recipe`, a classifier config `positive` and `negative`, a mixture config `components`).
The stored copy is the canonical form with URL secrets masked, and `<hash12>.origin.json` names
the original file and its folder, so relative paths still resolve there (the kind's loader reads
both). Registering is idempotent, and an invalid config writes nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from corpus_assets.core.config import ORIGIN_SUFFIX, parse_text
from corpus_assets.core.errors import ConfigError
from corpus_assets.core.store.atomic import write_bytes, write_json

SUFFIXES = (".toml", ".json")


class Identified(Protocol):
    @property
    def hash12(self) -> str: ...
    @property
    def masked(self) -> bytes: ...
    @property
    def partition_key(self) -> str: ...
    @property
    def base_dir(self) -> Path: ...


C = TypeVar("C", bound=Identified)


@dataclass(frozen=True)
class Registered(Generic[C]):
    """A config in the registry: its loaded form, where the copy is, whether it is new."""

    config: C
    path: Path
    new: bool


@dataclass(frozen=True)
class ConfigRegistry(Generic[C]):
    """The registry of the configs of one `kind` ("classifier"), stored in `<root>/<folder>`,
    loaded by `load_file`, recognised by all of `keys`, keyed by `key_pattern`."""

    kind: str
    folder: str
    key_pattern: str
    load_file: Callable[[Path], C]
    keys: tuple[str, ...]

    def recognises(self, path: Path) -> bool:
        """Whether `path` is a config of this kind: a TOML or JSON mapping with its keys
        (unreadable or invalid files are not; loading them says why)."""
        if path.suffix not in SUFFIXES:
            return False
        try:
            raw = parse_text(path.read_text(encoding="utf-8"), path.suffix[1:])
        except (OSError, UnicodeDecodeError, ConfigError):
            return False
        return isinstance(raw, dict) and all(key in raw for key in self.keys)

    def register(self, config_file: Path, root: Path, config: C | None = None) -> Registered[C]:
        """Store `config_file`'s masked canonical form (`config`: it loaded already)."""
        config = config if config is not None else self.load_file(config_file)
        target = root / self.folder / f"{config.hash12}.json"
        new = not target.exists()
        if not new and target.read_bytes() != config.masked:
            raise ConfigError(
                f"{target} holds a different {self.kind} config with the same hash prefix "
                f"{config.hash12}; remove it or use another data root"
            )
        if new:
            write_bytes(target, config.masked)
        origin = {"base_dir": str(config.base_dir), "file": str(Path(config_file).resolve())}
        origin_file = target.with_name(f"{target.stem}{ORIGIN_SUFFIX}")
        if _read_json(origin_file) != origin:
            write_json(origin_file, origin)
        return Registered(config=self.load_file(target), path=target, new=new)

    def path_for(self, root: Path, partition_key: str) -> Path:
        """The registered file of `partition_key`; ConfigError if it was never registered."""
        if not re.match(self.key_pattern, partition_key):
            raise ConfigError(
                f"{partition_key!r} is not a {self.kind} partition key; expected <name>-<hash12>"
            )
        path = root / self.folder / f"{partition_key[-12:]}.json"
        if not path.is_file():
            raise ConfigError(
                f"{self.kind} partition {partition_key!r} is not registered under "
                f"{root / self.folder}; run `corpus register CONFIG` with the same --root first"
            )
        return path

    def checked_path(self, root: Path, partition_key: str) -> Path:
        """The registered file of `partition_key`, loaded once to check it is that partition."""
        self.load(root, partition_key)
        return self.path_for(root, partition_key)

    def load(self, root: Path, partition_key: str) -> C:
        """The registered config of `partition_key`, checked to really be that partition."""
        config = self.load_file(self.path_for(root, partition_key))
        if config.partition_key != partition_key:
            raise ConfigError(
                f"registered {self.kind} config {config.hash12} is partition "
                f"{config.partition_key!r}, not {partition_key!r}"
            )
        return config


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # missing or corrupt: written again
        return None
