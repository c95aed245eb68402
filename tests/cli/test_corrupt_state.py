"""A corrupt ledger line, _SOURCE.json or shards manifest: exit 65, one line naming the file.

Each case corrupts one file of a real build (made by the real stages) and runs the stages that
read it: exit 65 (bad data, never retried; 1 would count as a crash and be retried), exactly one
line on stderr that names the file, never a traceback.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from support.corpus import own_instance_env, run_corpus

from corpus_assets.core.config import load_config
from corpus_assets.core.stages.verify import verify_path
from corpus_assets.core.store.atomic import MANIFEST
from corpus_assets.core.store.layout import Layout

REPO = Path(__file__).resolve().parents[2]
CorpusRunner = Callable[..., subprocess.CompletedProcess[str]]
ENTRY = {"source_key": "k", "source": "s", "license": "cc0-1.0", "documents": 3}
CORRUPTIONS = {
    "not JSON": b'{"source_key": "tiny-',
    "not UTF-8": b"\xff\xfe\x00 binary junk",
    "a list": b"[1, 2, 3]",
    "no fields": b"{}",
    "a bad file entry": json.dumps(
        {**ENTRY, "kind": "shards", "files": [{"name": 7}], "shards": [{"name": 7}]}
    ).encode(),
}


def _base(corpus: CorpusRunner, folder: Path) -> tuple[Path, Path]:
    """The bundled example built by the real stages into `folder`/root: (config, root)."""
    shutil.copytree(REPO / "examples" / "tiny", folder / "tiny")
    config = Path(shutil.copy(REPO / "examples" / "tiny.toml", folder / "tiny.toml"))
    root = folder / "root"
    for stage in ("fetch", "shard", "tokenize"):
        done = corpus("run", "--stage", stage, "--config", config, "--root", root)
        assert done.returncode == 0, done.stderr
    return config, root


@pytest.fixture(scope="module")
def built(corpus: CorpusRunner, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return _base(corpus, tmp_path_factory.mktemp("built"))


def _copy(built: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Layout]:
    config, root = built
    shutil.copytree(root, tmp_path / "root")
    return config, Layout(tmp_path / "root")


def _target(layout: Layout, config: Path, which: str) -> Path:
    cfg = load_config(config)
    if which == "ledger":
        return layout.ledger
    if which == "source":
        return layout.raw_source(cfg.source_key(cfg.model.sources[0])) / "_SOURCE.json"
    return layout.shards(cfg) / MANIFEST


CASES = [
    *[("ledger", stage, c) for stage in ("fetch", "shard") for c in CORRUPTIONS],
    *[("source", "fetch", c) for c in CORRUPTIONS],
    *[("shards", "tokenize", c) for c in CORRUPTIONS],
]


@pytest.mark.parametrize(("which", "stage", "corruption"), CASES)
def test_corrupt_record_is_exit_65_in_one_line(
    corpus: CorpusRunner,
    built: tuple[Path, Path],
    tmp_path: Path,
    which: str,
    stage: str,
    corruption: str,
) -> None:
    config, layout = _copy(built, tmp_path)
    target = _target(layout, config, which)
    target.write_bytes(CORRUPTIONS[corruption])
    done = corpus("run", "--stage", stage, "--config", config, "--root", layout.root)
    assert done.returncode == 65, done.stderr
    assert "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    where = f"{target}:1:" if which == "ledger" else f"{target}:"
    assert line.startswith(f"corpus run: error: {where} "), line
    assert "corrupt" in line or "not a shards manifest" in line, line
    assert target.read_bytes() == CORRUPTIONS[corruption], "the corrupt file is left for a look"


def test_a_corrupt_ledger_line_is_named_by_its_number(
    corpus: CorpusRunner, built: tuple[Path, Path], tmp_path: Path
) -> None:
    config, layout = _copy(built, tmp_path)
    good = layout.ledger.read_bytes()
    layout.ledger.write_bytes(good + b'{"source_key": "other", "documents": "3"}\n')
    done = corpus("run", "--stage", "shard", "--config", config, "--root", layout.root)
    assert done.returncode == 65
    assert done.stderr.splitlines() == [
        f"corpus run: error: {layout.ledger}:2: corrupt ledger line: 'documents' is missing or "
        "not an integer; delete that line (the next fetch of its source writes it again)"
    ]
    layout.ledger.write_bytes(good)  # the fix the message names
    again = corpus("run", "--stage", "shard", "--config", config, "--root", layout.root)
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_the_shard_stage_rebuilds_its_own_corrupt_manifest(
    corpus: CorpusRunner, built: tuple[Path, Path], tmp_path: Path, corruption: str
) -> None:
    """The shards manifest is the shard stage's completion marker: a corrupt one is rebuilt."""
    config, layout = _copy(built, tmp_path)
    manifest = _target(layout, config, "shards")
    expected = manifest.read_bytes()
    manifest.write_bytes(CORRUPTIONS[corruption])
    done = corpus("run", "--stage", "shard", "--config", config, "--root", layout.root)
    assert done.returncode == 0, done.stderr
    assert manifest.read_bytes() == expected
    assert verify_path(manifest) == []


def test_a_corrupt_origin_record_is_written_again(built: tuple[Path, Path], tmp_path: Path) -> None:
    """`configs/<hash12>.origin.json` only says where a config came from: rewritten, no crash."""
    config, layout = _copy(built, tmp_path)
    origin = layout.configs / f"{load_config(config).hash12}.origin.json"
    origin.parent.mkdir(parents=True, exist_ok=True)
    origin.write_bytes(b"\xff\xfe not UTF-8")
    env = own_instance_env()
    done = run_corpus("register", config, "--root", layout.root, environ=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(origin.read_text(encoding="utf-8"))["file"] == str(config.resolve())


def test_a_ledger_line_without_a_license_stops_the_shard_stage(
    corpus: CorpusRunner, built: tuple[Path, Path], tmp_path: Path
) -> None:
    config, layout = _copy(built, tmp_path)
    [entry] = [json.loads(line) for line in layout.ledger.read_text().splitlines()]
    del entry["license"]
    layout.ledger.write_text(json.dumps(entry) + "\n")
    done = corpus("run", "--stage", "shard", "--config", config, "--root", layout.root)
    assert done.returncode == 65 and "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"corpus run: error: {layout.ledger}: corrupt ledger line of source ")
