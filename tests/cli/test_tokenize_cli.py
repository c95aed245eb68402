"""`corpus run --stage tokenize` and `corpus verify` in subprocesses: exit codes, kills, reruns."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.corpus import run_corpus, start_corpus
from support.processes import running

from corpus_assets.core.config import load_config
from corpus_assets.core.store.layout import Layout

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from test_tokenize import GPT2, tiny_docs, tree_bytes, write_shards

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


def corpus(
    *args: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_corpus(*args, environ=env or ENV)


def start(*args: str | Path) -> subprocess.Popen[str]:
    """The CLI in the background; no pipes, so a stray worker can never block the test."""
    return start_corpus(*args, environ=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def setup_build(
    tmp: Path,
    tokenizer: dict[str, Any],
    docs: list[tuple[str, str]],
    n_shards: int,
    name: str = "root",
) -> tuple[Path, Path, Layout]:
    """A config file and a data root whose shards folder (Layout.shards) holds `docs`."""
    config = tmp / f"{name}.json"
    config.write_text(json.dumps({**with_source(tmp), "tokenizer": tokenizer}))
    cfg = load_config(config)
    layout = Layout(tmp / name)
    write_shards(layout.shards(cfg), docs, n_shards, cfg)
    return config, layout.root, layout


def with_source(tmp: Path) -> dict[str, Any]:
    """A config with one real input file (every stage pre-flights its sources); no tokenizer."""
    (tmp / "input.jsonl").write_text('{"text": "the shards are written by the test"}\n')
    source = {"name": "s", "kind": "jsonl", "path": "input.jsonl", "license": "mit"}
    return {"dataset": "t", "version": "v1", "sources": [source]}


def tokens_dir(layout: Layout, config: Path) -> Path:
    return layout.tokens(load_config(config))


def test_tokenize_verify_and_rerun(tmp_path: Path) -> None:
    config, root, layout = setup_build(tmp_path, {"id": "bytes"}, tiny_docs(120), 3)
    first = corpus("run", "--stage", "tokenize", "--config", config, "--root", root)
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    out = tokens_dir(layout, config)
    assert summary["documents"] == 120 and summary["shards"] == 3
    assert (summary["dtype"], summary["eos_id"], summary["vocab_size"]) == ("uint16", 256, 257)
    assert summary["manifest"] == str((out / "_MANIFEST.json").relative_to(root))
    assert summary["stage_key"].endswith("/tokenize")
    assert "tokenize done: 120 documents" in first.stderr
    ok = corpus("verify", out)
    assert ok.returncode == 0 and ok.stdout.startswith("ok:"), ok.stderr
    again = corpus("run", "--stage", "tokenize", "--config", config, "--root", root)
    assert again.returncode == 0 and again.stdout == first.stdout
    assert "already built" in again.stderr


def test_verify_detects_a_damaged_token_file(tmp_path: Path) -> None:
    config, root, layout = setup_build(tmp_path, {"id": "bytes"}, tiny_docs(30), 2)
    assert corpus("run", "--stage", "tokenize", "--config", config, "--root", root).returncode == 0
    out = tokens_dir(layout, config)
    with open(out / "shard-00001.bin", "r+b") as fh:
        fh.seek(10)
        fh.write(b"\x07")
    bad = corpus("verify", out / "_MANIFEST.json")
    assert bad.returncode == 65
    assert "shard-00001.bin: sha256 differs" in bad.stderr


def test_relative_tokenizer_path_gpt2(tmp_path: Path) -> None:
    (tmp_path / "tok").mkdir()
    shutil.copy(GPT2, tmp_path / "tok" / "tokenizer.json")
    tok = {"id": "gpt2", "path": "tok/tokenizer.json"}
    config, root, layout = setup_build(tmp_path, tok, tiny_docs(50), 2)
    run = corpus("run", "--stage", "tokenize", "--config", config, "--root", root)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["eos_id"] == 50256
    assert layout.tokens(load_config(config)).parts[-4] == "gpt2"


def test_offline_hub_name_not_cached_is_exit_64(tmp_path: Path) -> None:
    """HF_HUB_OFFLINE without a cached copy fails the same way on every retry: a config error."""
    tok = {"id": "openai-community/gpt2"}
    config, root, _ = setup_build(tmp_path, tok, tiny_docs(5), 1)
    env = {**ENV, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "empty-hf-home")}
    run = corpus("run", "--stage", "tokenize", "--config", config, "--root", root, env=env)
    assert run.returncode == 64, run.stderr
    assert "'openai-community/gpt2'" in run.stderr and "tokenizer.path" in run.stderr
    assert "HF_HUB_OFFLINE" in run.stderr
    assert not (root / "tokens").exists() and not (root / "work").exists()


def test_corrupted_shard_is_exit_65_and_nothing_published(tmp_path: Path) -> None:
    config, root, layout = setup_build(tmp_path, {"id": "bytes"}, tiny_docs(40), 2)
    shard = layout.shards(load_config(config)) / "shard-00000.parquet"
    data = bytearray(shard.read_bytes())
    data[100] ^= 0x55
    shard.write_bytes(bytes(data))
    run = corpus("run", "--stage", "tokenize", "--config", config, "--root", root)
    assert run.returncode == 65, run.stderr
    assert "shard-00000.parquet: sha256 differs" in run.stderr
    assert not (root / "tokens").exists()


def test_missing_shards_is_exit_65(tmp_path: Path) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({**with_source(tmp_path), "tokenizer": {"id": "bytes"}}))
    run = corpus("run", "--stage", "tokenize", "--config", config, "--root", tmp_path / "r")
    assert run.returncode == 64 and "materialize shards first: no shards manifest" in run.stderr


def test_bad_tokenizer_config_is_exit_64(tmp_path: Path) -> None:
    config = tmp_path / "c.json"
    bad = {"dataset": "t", "version": "v1", "tokenizer": {"id": "bytes", "eos_id": 3}}
    config.write_text(json.dumps(bad))
    run = corpus("run", "--stage", "tokenize", "--config", config, "--root", tmp_path / "r")
    assert run.returncode == 64 and "eos_id is 256" in run.stderr
    assert not (tmp_path / "r").exists()


# --- kill and resume --------------------------------------------------------------------------


def ready_in_time(proc: subprocess.Popen[str], ready: Callable[[], bool], timeout: float) -> bool:
    """Poll until `ready()` (True) or the process ends / time runs out (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.005)
    return False


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def kill(proc: subprocess.Popen[str], snapshot: Callable[[], Any]) -> None:
    """SIGKILL the stage process; its workers die with it and write nothing afterwards."""
    workers = children(proc.pid)
    proc.kill()
    proc.wait(timeout=30)
    at_death = snapshot()
    deadline = time.monotonic() + 10
    while any(running(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.01)
    alive = [w for w in workers if running(w)]
    for pid in alive:  # do not leave them behind
        os.kill(pid, 9)
    assert not alive, "a tokenize worker outlived its killed stage"
    time.sleep(0.2)
    assert snapshot() == at_death, "files changed after the stage was killed"


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_kill_and_resume_is_byte_identical(tmp_path: Path) -> None:
    docs = tiny_docs() * 3
    tok = {"id": "gpt2", "path": str(GPT2)}
    ref_config, ref_root, ref_layout = setup_build(tmp_path, tok, docs, 12, name="ref")
    ref = corpus("run", "--stage", "tokenize", "--config", ref_config, "--root", ref_root,
                 "--workers", "2")  # fmt: skip
    assert ref.returncode == 0, ref.stderr
    reference = tree_bytes(tokens_dir(ref_layout, ref_config))

    config, root, layout = setup_build(tmp_path, tok, docs, 12)
    cfg = load_config(config)
    work = layout.work(cfg, "tokenize")
    markers, final = work / "markers", layout.tokens(cfg)
    args = ("run", "--stage", "tokenize", "--config", config, "--root", root, "--workers")

    def marked() -> list[Path]:
        return sorted(markers.glob("*.json")) if markers.exists() else []

    def temp_files() -> bool:
        return (work / "out").exists() and any((work / "out").glob(".*.tmp-*"))

    # --workers 8 on GPT-2 is a pool of 2 processes (4 library threads each); 2 is this process
    kill_points: list[tuple[str, str, Callable[[], bool]]] = [
        ("while starting", "8", lambda: True),
        ("while writing the first files", "2", temp_files),
        ("after the first marker", "8", lambda: len(marked()) >= 1),
        ("half done", "2", lambda: len(marked()) >= 6),
        ("more than half done", "8", lambda: len(marked()) >= 8),
    ]
    landed = []
    survivors: dict[str, int] = {}
    for label, workers, ready in kill_points:
        proc = start(*args, workers)
        hit = ready_in_time(proc, ready, timeout=120)
        if label == "while starting":
            time.sleep(0.3)
        if proc.poll() is None:
            kill(proc, lambda: sorted(p.name for p in work.rglob("*")))
            survivors = {
                f"{m.stem}.bin": (work / "out" / f"{m.stem}.bin").stat().st_ino for m in marked()
            }
            landed.append(label)
            assert not (final / "_MANIFEST.json").exists()
        else:
            proc.wait(timeout=30)
        assert hit or label == "while starting", f"stage ended before the kill point {label!r}"
    assert {"after the first marker", "half done", "more than half done"} <= set(landed)
    assert len(survivors) >= 8

    resumed = corpus(*args, "8")
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming: {len(survivors)} of 12 shards done" in resumed.stderr
    assert tree_bytes(final) == reference
    # finished files were not redone: the published file is the one written before the kill
    for name, inode in survivors.items():
        assert (final / name).stat().st_ino == inode, name
    assert not (work / "out").exists() and not markers.exists()
    assert corpus("verify", final).returncode == 0


@pytest.mark.parametrize(
    ("tokenizer", "workers"),
    [({"id": "gpt2", "path": str(GPT2)}, ("1", "8")), ({"id": "bytes"}, ("1", "2"))],
)
def test_workers_cli_byte_identical(
    tmp_path: Path, tokenizer: dict[str, Any], workers: tuple[str, str]
) -> None:
    """This process vs a pool of 2 worker processes: the same files, the same summary."""
    docs = tiny_docs(400)
    outs, summaries = [], []
    for w in workers:
        config, root, layout = setup_build(tmp_path, tokenizer, docs, 5, name=f"w{w}")
        run = corpus("run", "--stage", "tokenize", "--config", config, "--root", root,
                     "--workers", w)  # fmt: skip
        assert run.returncode == 0, run.stderr
        outs.append(tree_bytes(tokens_dir(layout, config)))
        summaries.append(json.loads(run.stdout))
    assert outs[0] == outs[1]
    assert summaries[0] == summaries[1]
