"""A config that cannot build is refused first: `corpus build`, `register` and `run` exit 64 with
one line, before a data root, an instance, a partition, a run or a fetch exists
(docs/reliability.md).

The hub cases run the real Hugging Face Hub client on a cache this test writes under a temporary
HF_HOME, with HF_HUB_OFFLINE=1: nothing here touches the network.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

CorpusRunner = Callable[..., subprocess.CompletedProcess[str]]
REPO = Path(__file__).resolve().parents[2]
TINY_DOCS = REPO / "examples" / "tiny" / "docs.jsonl"
SOURCE = {"name": "tiny", "kind": "jsonl", "path": "docs.jsonl", "license": "cc0-1.0"}
COMMIT = "0123456789abcdef0123456789abcdef01234567"
HAND = {"version": "v1", "dataset": "tinystories", "tokenizer": {"id": "bytes"}}
COMMANDS = {
    "build": ("build", "{config}"),
    "register": ("register", "{config}"),
    "run fetch": ("run", "--stage", "fetch", "--config", "{config}"),
}


def _write(folder: Path, raw: dict[str, Any], name: str = "c.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(TINY_DOCS, folder / "docs.jsonl")
    path = folder / name
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def _hand(folder: Path) -> Path:
    return _write(folder, HAND)


def _missing_tokenizer(folder: Path) -> Path:
    tokenizer = {"id": "gpt2", "path": "tokenizers/gpt2/tokenizer.json"}
    return _write(folder, {**HAND, "tokenizer": tokenizer, "sources": [SOURCE]})


def _not_a_tokenizer(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_text('{"version": "1.0", "model": "no"}\n')
    tokenizer = {"id": "mine", "path": "tokenizer.json"}
    return _write(folder, {**HAND, "tokenizer": tokenizer, "sources": [SOURCE]})


def _source_matches_nothing(folder: Path) -> Path:
    return _write(folder, {**HAND, "sources": [{**SOURCE, "path": "data/*.jsonl"}]})


BAD = {
    "hand example": (_hand, ("config has no sources", "[[sources]]")),
    "missing tokenizer file": (_missing_tokenizer, ("file not found", "gpt2/tokenizer.json")),
    "not a tokenizer": (_not_a_tokenizer, ("tokenizer.json is not a valid tokenizer.json",)),
    "source matches nothing": (_source_matches_nothing, ("no files match 'data/*.jsonl'",)),
}


def _args(command: str, config: Path, root: Path) -> list[str]:
    return [a.format(config=config) for a in COMMANDS[command]] + ["--root", str(root)]


def _one_error_line(out: subprocess.CompletedProcess[str], command: str) -> str:
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"corpus {command.split()[0]}: error: "), lines[0]
    assert out.stdout == ""
    return lines[0]


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("case", list(BAD))
def test_a_config_that_cannot_build_is_refused_before_anything(
    case: str, command: str, tmp_path: Path, corpus: CorpusRunner
) -> None:
    make, says = BAD[case]
    config = make(tmp_path / "in")
    root = tmp_path / "root"
    out = corpus(*_args(command, config, root))
    assert out.returncode == 64, out.stderr
    line = _one_error_line(out, command)
    for fragment in says:
        assert fragment in line, line
    assert not root.exists(), sorted(str(p) for p in root.rglob("*"))


@pytest.mark.parametrize("stage", ["shard", "tokenize"])
def test_every_stage_checks_the_whole_config(
    stage: str, tmp_path: Path, corpus: CorpusRunner
) -> None:
    root = tmp_path / "root"
    out = corpus("run", "--stage", stage, "--config", _hand(tmp_path / "in"), "--root", root)
    assert out.returncode == 64, out.stderr
    assert "config has no sources" in _one_error_line(out, "run")
    assert not root.exists()


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")
    }


def test_an_existing_root_is_left_untouched(tmp_path: Path, corpus: CorpusRunner) -> None:
    root = tmp_path / "root"
    good = _write(tmp_path / "good", {**HAND, "sources": [SOURCE]})
    registered = corpus("register", good, "--root", root)
    assert registered.returncode == 0, registered.stderr
    assert (root / "dagster").is_dir() and (root / "configs").is_dir()  # register really writes
    before = _snapshot(root)
    for case, (make, _) in BAD.items():
        config = make(tmp_path / case.replace(" ", "-"))
        for command in ("build", "register"):
            out = corpus(*_args(command, config, root))
            assert out.returncode == 64, (case, command, out.stderr)
    assert _snapshot(root) == before, "a refused config wrote under the data root"


# --- tokenizers from the Hugging Face Hub (a local cache, offline) ----------------------------


def word_tokenizer(path: Path) -> Path:
    """A small real WordLevel `tokenizer.json`: `<unk>` 0, EOS `</s>` 1, then lowercase words."""
    vocab = {"<unk>": 0, "</s>": 1, **{w: i + 2 for i, w in enumerate(["the", "a", "and"])}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()  # type: ignore[assignment]
    tok.add_special_tokens(["<unk>", "</s>"])
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return path


def _hub_cache(hf_home: Path, repo_id: str) -> Path:
    """A hub cache entry for `repo_id` as `hf_hub_download` leaves it: refs/main, a snapshot."""
    repo = hf_home / "hub" / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    return word_tokenizer(repo / "snapshots" / COMMIT / "tokenizer.json")


def _hub_config(folder: Path, repo_id: str) -> Path:
    return _write(folder, {**HAND, "tokenizer": {"id": repo_id}, "sources": [SOURCE]})


def _offline(hf_home: Path) -> dict[str, str]:
    return {"HF_HUB_OFFLINE": "1", "HF_HOME": str(hf_home)}


def test_a_cached_hub_tokenizer_builds_offline(tmp_path: Path, corpus: CorpusRunner) -> None:
    hf_home = tmp_path / "hf-home"
    cached = _hub_cache(hf_home, "test-org/word-level")
    config = _hub_config(tmp_path / "in", "test-org/word-level")
    root = tmp_path / "root"
    for stage in ("fetch", "shard", "tokenize"):
        args = ("run", "--stage", stage, "--config", config, "--root", root, "--workers", "1")
        out = corpus(*args, env=_offline(hf_home))
        assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    manifest = json.loads((root / summary["manifest"]).read_text())
    assert manifest["tokenizer"]["sha256"] == hashlib.sha256(cached.read_bytes()).hexdigest()
    assert summary["eos_id"] == 1 and summary["documents"] > 0


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_hub_tokenizer_not_in_the_offline_cache(
    command: str, tmp_path: Path, corpus: CorpusRunner
) -> None:
    hf_home = tmp_path / "hf-home"
    _hub_cache(hf_home, "test-org/word-level")  # a cache that holds another repo only
    config = _hub_config(tmp_path / "in", "test-org/not-cached")
    root = tmp_path / "root"
    out = corpus(*_args(command, config, root), env=_offline(hf_home))
    assert out.returncode == 64, out.stderr
    line = _one_error_line(out, command)
    assert "'test-org/not-cached': not in the local Hugging Face cache" in line
    assert str(hf_home / "hub") in line and "HF_HUB_OFFLINE" in line and "tokenizer.path" in line
    assert not root.exists()


def test_a_malformed_hub_id(tmp_path: Path, corpus: CorpusRunner) -> None:
    hf_home = tmp_path / "hf-home"
    root = tmp_path / "root"
    out = corpus(
        "build", _hub_config(tmp_path / "in", "org/a..b"), "--root", root, env=_offline(hf_home)
    )
    assert out.returncode == 64, out.stderr
    assert "tokenizer 'org/a..b' is not a Hugging Face Hub repo id" in _one_error_line(out, "build")
    assert not root.exists() and not hf_home.exists()
