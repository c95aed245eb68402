"""Registered mixture configs: `<root>/mixture-configs/<hash12>.json`, found by partition key.

A mixture config is recognised by its keys: a mapping with `components` (a corpus config has
`sources`, a task config `recipe`, a classifier config `positive` and `negative`). The stored copy
is the canonical form, so it hashes to itself, and `<hash12>.origin.json` names the original
file and its folder, so relative component folders still resolve there (`config_base_dir`). A
mixture config with secrets in a component URL is not registered: the registry keeps none, and
object storage reads its credentials from the environment.
"""

from __future__ import annotations

from pathlib import Path

from corpus_assets.core.errors import ConfigError
from corpus_assets.core.mixture_config import (
    MIXTURE_KEY,
    LoadedMixtureConfig,
    load_mixture_config,
)
from corpus_assets.core.store.config_registry import ConfigRegistry, Registered

MIXTURE_CONFIGS = "mixture-configs"
MIXTURES = ConfigRegistry(
    "mixture", MIXTURE_CONFIGS, MIXTURE_KEY, load_mixture_config, ("components",)
)
RegisteredMixture = Registered[LoadedMixtureConfig]

is_mixture_config = MIXTURES.recognises
path_for = MIXTURES.path_for
load = MIXTURES.load


def register(config_file: Path, root: Path) -> RegisteredMixture:
    """Validate `config_file` and store its canonical form; idempotent; invalid or carrying a
    secret: nothing written."""
    config = load_mixture_config(config_file)
    if config.masked != config.canonical:
        raise ConfigError(
            f"{config_file}: a component URL carries a secret (a password or query value); the "
            "registry keeps none: give object storage its credentials in the environment"
        )
    return MIXTURES.register(config_file, root, config)
