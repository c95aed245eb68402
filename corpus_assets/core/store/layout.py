"""Where everything lives under the data root (DESIGN §4)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from corpus_assets.core.config import LoadedConfig

DEFAULT_ROOT = "./corpus-data"


def default_root() -> Path:
    return Path(os.environ.get("CORPUS_ROOT", DEFAULT_ROOT))


def tokenizer_slug(tokenizer_id: str) -> str:
    """A tokenizer id as one path part (`openai-community/gpt2` -> `openai-community--gpt2`)."""
    return tokenizer_id.replace("/", "--")


@dataclass(frozen=True)
class Layout:
    """Paths of one data root."""

    root: Path

    @property
    def configs(self) -> Path:
        return self.root / "configs"

    @property
    def raw(self) -> Path:
        return self.root / "raw"

    @property
    def ledger(self) -> Path:
        return self.raw / "LEDGER.jsonl"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def run_log(self, run_id: str) -> Path:
        """The full log of one `corpus build` run (its Dagster events and the stages' stderr)."""
        return self.logs / f"{run_id}.log"

    @property
    def dagster_home(self) -> Path:
        return self.root / "dagster"

    def raw_source(self, source_key: str) -> Path:
        return self.raw / source_key

    def raw_staging(self, source_key: str) -> Path:
        return self.raw / ".staging" / source_key

    def raw_lock(self, source_key: str) -> Path:
        return self.raw / ".locks" / f"{source_key}.lock"

    def shards(self, cfg: LoadedConfig) -> Path:
        return self.root / "corpus" / cfg.model.dataset / cfg.model.version / cfg.hash12

    def tokens(self, cfg: LoadedConfig) -> Path:
        m = cfg.model
        return (
            self.root
            / "tokens"
            / tokenizer_slug(m.tokenizer.id)
            / m.dataset
            / m.version
            / cfg.hash12
        )

    def work(self, cfg: LoadedConfig, stage: str) -> Path:
        return self.root / "work" / cfg.hash12 / stage

    def config_file(self, cfg: LoadedConfig) -> Path:
        return self.configs / f"{cfg.hash12}.json"
