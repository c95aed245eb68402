"""Helpers of the Ray tests: the stage environment, a config, the `corpus` CLI, output trees."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from support.corpus import run_corpus

REPO = Path(__file__).resolve().parents[2]
GPT2 = REPO / "data" / "tokenizers" / "gpt2" / "tokenizer.json"


def ray_env(home: Path, tmpdir: Path) -> dict[str, str]:
    """The environment of a stage: its own HOME and TMPDIR, no inherited Ray settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return {**env, "HOME": str(home), "TMPDIR": str(tmpdir), "HF_HUB_OFFLINE": "1"}


def write_config(folder: Path, data: Path) -> Path:
    """One source per part of the benchmark corpus: a shard task each (dedup spans them all)."""
    sources = [
        {
            "name": part.stem.replace("_", "-"),
            "kind": "jsonl",
            "path": str(part),
            "id_field": "id",
            "license": "cdla-sharing-1.0",
        }
        for part in sorted(data.glob("part-*.jsonl"))
    ]
    assert len(sources) >= 4, sources
    path = folder / "c.json"
    config = {
        "dataset": "t",
        "version": "v1",
        "tokenizer": {"id": "gpt2", "path": str(GPT2)},
        "sources": sources,
        "shards": {"target_mb": 0.5},
    }
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def corpus(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`corpus ARGS...` in the stage environment `env`; with `check`, it must exit 0."""
    return run_corpus(*args, environ=env, check=check)


def build(env: dict[str, str], cfg: Path, root: Path, *extra: str) -> list[str]:
    """fetch (local), then shard and tokenize with `extra`; their stderr."""
    common = ("--config", str(cfg), "--root", str(root))
    corpus(env, "run", "--stage", "fetch", *common)
    return [
        corpus(env, "run", "--stage", stage, *common, *extra).stderr
        for stage in ("shard", "tokenize")
    ]


def tree(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def outputs(root: Path) -> dict[str, bytes]:
    """Every published file of a build: shards, tokens and their manifests."""
    return {f"corpus/{k}": v for k, v in tree(root / "corpus").items()} | {
        f"tokens/{k}": v for k, v in tree(root / "tokens").items()
    }
