"""`corpus hash`: the identity of a config as people and scripts see it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

HAND = {"version": "v1", "dataset": "tinystories", "tokenizer": {"id": "bytes"}}
CANON = '{"dataset":"tinystories","tokenizer":{"id":"bytes"},"version":"v1"}'
SHA = "a03711ec959b2a8fb6cf51d9445bee90fcb69a103cfa033483b52f836269c0a6"
BUILD_ID = "corpus/tinystories/v1/a03711ec959b"
PARTITION = "tinystories-v1-a03711ec959b"

CorpusRunner = Callable[..., subprocess.CompletedProcess[str]]


def test_hash_human_readable(corpus: CorpusRunner, tmp_path: Path) -> None:
    path = tmp_path / "hand.json"
    path.write_text(json.dumps(HAND))
    out = corpus("hash", path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines == [
        f"canonical      {CANON}",
        f"sha256         {SHA}",
        f"build id       {BUILD_ID}",
        f"partition key  {PARTITION}",
    ]
    assert out.stderr == ""


def test_hash_json(corpus: CorpusRunner, tmp_path: Path) -> None:
    path = tmp_path / "hand.json"
    path.write_text(json.dumps(HAND))
    out = corpus("hash", "--json", path)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info == {
        "canonical": CANON,
        "sha256": SHA,
        "build_id": BUILD_ID,
        "partition_key": PARTITION,
        "stage_keys": {s: f"{BUILD_ID}/{s}" for s in ("fetch", "shard", "tokenize", "cleanup")},
    }
    assert len(info["canonical"].encode("utf-8")) == 67


@pytest.mark.parametrize(
    "text",
    [
        '{"dataset":"tinystories","tokenizer":{"id":"bytes"},"version":"v1"}',
        '\n\n  {  "tokenizer" : { "id" :"bytes" },\t"version":"v1",\n"dataset":"tinystories"}\n',
    ],
)
def test_hash_ignores_spelling(corpus: CorpusRunner, tmp_path: Path, text: str) -> None:
    path = tmp_path / "c.json"
    path.write_text(text)
    out = corpus("hash", "--json", path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["sha256"] == SHA


def test_hash_of_toml_twin(corpus: CorpusRunner, tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('dataset = "tinystories"\nversion = "v1"\n\n[tokenizer]\nid = "bytes"\n')
    out = corpus("hash", "--json", path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["partition_key"] == PARTITION


def test_one_changed_value_is_another_partition(corpus: CorpusRunner, tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({**HAND, "version": "v2"}))
    info = json.loads(corpus("hash", "--json", path).stdout)
    assert info["sha256"] != SHA
    assert info["partition_key"] == f"tinystories-v2-{info['sha256'][:12]}"
    assert info["build_id"] == f"corpus/tinystories/v2/{info['sha256'][:12]}"


def test_hash_bad_config_exits_64(corpus: CorpusRunner, tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({**HAND, "dataset": "../x"}))
    out = corpus("hash", path)
    assert out.returncode == 64
    assert out.stdout == ""
    [line] = out.stderr.strip().splitlines()
    assert "dataset is not a path-safe name: it has '/'" in line
