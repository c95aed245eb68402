"""Ray tests: a small benchmark corpus, a `corpus` runner whose HOME must stay empty."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

if importlib.util.find_spec("ray") is None:  # not imported here: a stage imports it itself
    pytest.skip("the Ray tests need the [ray] extra", allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]
GPT2 = REPO / "data" / "tokenizers" / "gpt2" / "tokenizer.json"
MAKE_CORPUS = REPO / "bench" / "make_corpus.py"


@pytest.fixture(scope="session")
def bench_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ray-bench") / "corpus"
    subprocess.run(
        [sys.executable, str(MAKE_CORPUS), "--out", str(out), "--mb", "3"],
        check=True,
        capture_output=True,
    )
    return out


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """HOME for every process of the test; it must still be empty afterwards."""
    folder = tmp_path / "home"
    folder.mkdir()
    yield folder
    left = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    assert left == [], f"files left in HOME: {left}"


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """TMPDIR for the stages: short, as Ray's socket paths under it must be (107 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def ray_env(home: Path, tmpdir: Path) -> dict[str, str]:
    """The environment of a stage: its own HOME and TMPDIR, no inherited Ray settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return {**env, "HOME": str(home), "TMPDIR": str(tmpdir), "HF_HUB_OFFLINE": "1"}


def write_config(folder: Path, data: Path) -> Path:
    path = folder / "c.json"
    path.write_text(
        json.dumps(
            {
                "dataset": "t",
                "version": "v1",
                "tokenizer": {"id": "gpt2", "path": str(GPT2)},
                "sources": [
                    {
                        "name": "bench",
                        "kind": "jsonl",
                        "path": f"{data}/part-*.jsonl",
                        "id_field": "id",
                        "license": "cdla-sharing-1.0",
                    }
                ],
                "shards": {"target_mb": 0.5},
            }
        ),
        encoding="utf-8",
    )
    return path


def corpus(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "corpus_assets.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"corpus {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc


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
