"""`corpus cleanup`: removes one build's corpus/tokens/work folders, never raw/; idempotent."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

CorpusRunner = Callable[..., subprocess.CompletedProcess[str]]
WriteConfig = Callable[[Path, Mapping[str, Any]], Path]


def _config(version: str, tokenizer: str = "openai-community/gpt2") -> dict[str, Any]:
    return {"dataset": "clean", "version": version, "tokenizer": {"id": tokenizer}}


def _hash12(corpus: CorpusRunner, cfg: Path) -> str:
    out = corpus("hash", "--json", cfg)
    assert out.returncode == 0, out.stderr
    return str(json.loads(out.stdout)["sha256"][:12])


def _fill(folder: Path) -> Path:
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "file.bin").write_bytes(b"x")
    (folder / "_MANIFEST.json").write_text("{}")
    return folder


def _tree(root: Path) -> list[str]:
    """Every file under `root` but the build locks (never deleted: see `locks.build_lock`)."""
    files = (p.relative_to(root) for p in root.rglob("*") if p.is_file())
    return sorted(str(p) for p in files if p.parts[0] != "locks")


def test_cleanup_removes_one_build_and_keeps_raw_and_other_builds(
    tmp_path: Path, data_root: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    mine = write_config(tmp_path / "mine.json", _config("v1"))
    other = write_config(tmp_path / "other.toml", _config("v2"))
    h, o = _hash12(corpus, mine), _hash12(corpus, other)
    assert h != o
    doomed = [
        _fill(data_root / "corpus" / "clean" / "v1" / h),
        _fill(data_root / "tokens" / "openai-community--gpt2" / "clean" / "v1" / h),
        _fill(data_root / "work" / h / "shard"),
    ]
    (data_root / "work" / h / "tokenize").mkdir()
    kept = [
        _fill(data_root / "raw" / "src-0123456789ab"),
        _fill(data_root / "corpus" / "clean" / "v2" / o),
        _fill(data_root / "tokens" / "openai-community--gpt2" / "clean" / "v2" / o),
        _fill(data_root / "work" / o / "shard"),
    ]
    (data_root / "raw" / "LEDGER.jsonl").write_text('{"source_key": "src-0123456789ab"}\n')
    kept_files = [
        f
        for f in _tree(data_root)
        if not any(f.startswith(str(d.relative_to(data_root))) for d in doomed)
    ]

    out = corpus("cleanup", "--config", mine, "--root", data_root)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["stage_key"] == f"corpus/clean/v1/{h}/cleanup"
    assert sorted(summary["removed"]) == sorted(
        [
            f"corpus/clean/v1/{h}",
            f"tokens/openai-community--gpt2/clean/v1/{h}",
            f"work/{h}",
        ]
    )
    for folder in doomed:
        assert not folder.exists()
    assert not (data_root / "work" / h).exists()
    for folder in kept:
        assert folder.is_dir()
    assert _tree(data_root) == kept_files
    assert not [p for p in data_root.rglob("*") if ".deleting-" in p.name]
    locks = data_root / "locks" / h
    assert sorted(p.name for p in locks.iterdir()) == ["shard.lock", "tokenize.lock"]
    assert all(p.stat().st_size == 0 for p in locks.iterdir())  # released: no holder named

    again = corpus("cleanup", "--config", mine, "--root", data_root)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["removed"] == []
    assert _tree(data_root) == kept_files


def test_cleanup_of_a_build_that_never_ran(
    tmp_path: Path, data_root: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    cfg = write_config(tmp_path / "c.json", _config("v1", tokenizer="bytes"))
    out = corpus("cleanup", "--config", cfg, "--root", data_root)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["removed"] == []
