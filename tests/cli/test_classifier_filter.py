"""`[[filters.classifiers]]` through the CLI: the scores in the shards, `min_score` and
`keep_top` (the same bytes for any worker count and after a kill), the manifest entry, and a
model that cannot be used refused in one line before any task."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from support.classifier import built_classifier, documents, train
from support.corpus import corpus_argv, run_corpus

from corpus_assets.core.stages.shard_quality import histogram, keep_count
from corpus_assets.core.store.digests import file_sha256
from corpus_assets.core.text.quality import Scorer

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
HEAD = (
    'dataset = "t"\nversion = "v1"\ntokenizer = {id = "bytes"}\n'
    '[[sources]]\nname = "docs"\nkind = "jsonl"\npath = "in.jsonl"\nid_field = "id"\n'
    'license = "mit"\n[licenses]\nallow = ["mit"]\n[dedup]\nnear = false\n'
)
KEY = "edu-0123456789ab"


def corpus(*args: Any, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run_corpus(*args, environ=ENV, check=check)


def setup(folder: Path, texts: list[str], classifiers: str) -> Path:
    """A config in `folder` over `texts` (ids d00000...) with `classifiers` tables, and the
    model `folder/model.bin`."""
    train(folder)
    lines = [json.dumps({"id": f"d{i:05d}", "text": t}) + "\n" for i, t in enumerate(texts)]
    (folder / "in.jsonl").write_text("".join(lines), encoding="utf-8")
    cfg = folder / "c.toml"
    cfg.write_text(HEAD + classifiers, encoding="utf-8")
    return cfg


def shard(cfg: Path, root: Path, workers: int = 1) -> tuple[dict[str, Any], Path]:
    corpus("run", "--stage", "fetch", "--config", cfg, "--root", root)
    out = corpus("run", "--stage", "shard", "--config", cfg, "--root", root, "--workers", workers)
    path = root / json.loads(out.stdout)["manifest"]
    return json.loads(path.read_text()), path.parent


def rows(folder: Path, manifest: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for entry in manifest["shards"]:
        out += pq.read_table(folder / entry["name"]).to_pylist()
    return out


def test_min_score_keeps_exactly_the_documents_scored_at_or_over_it(tmp_path: Path) -> None:
    texts = documents(300)
    table = '[[filters.classifiers]]\nname = "edu"\nmodel = "model.bin"\nlabel = "hq"\n'
    cfg = setup(tmp_path, texts, table + "min_score = 0.5\n")
    manifest, folder = shard(cfg, tmp_path / "root")
    scores = Scorer(tmp_path / "model.bin", "hq").many(texts)
    kept = rows(folder, manifest)
    assert [r["id"] for r in kept] == [f"d{i:05d}" for i, s in enumerate(scores) if s >= 0.5]
    assert [r["quality_edu"] for r in kept] == [s for s in scores if s >= 0.5]
    assert [r["quality_edu"] for r in kept] == Scorer(tmp_path / "model.bin", "hq").many(
        [r["text"] for r in kept]
    )  # the shards' texts score as their columns say
    low = sum(s < 0.5 for s in scores)
    assert 0 < low < len(texts) and manifest["dropped"] == {"quality_edu": low}
    sha = file_sha256(tmp_path / "model.bin")
    assert manifest["config"]["filters"]["classifiers"][0]["model_sha256"] == sha
    assert manifest["classifiers"] == [
        {
            "name": "edu",
            "column": "quality_edu",
            "model": "model.bin",
            "model_sha256": sha,
            "label": "hq",
            "lowercase": False,
            "min_score": 0.5,
            "scored": 300,
            "dropped": low,
            "kept": 300 - low,
            "realized_share": (300 - low) / 300,
            "score_at_cut": min(s for s in scores if s >= 0.5),
            "histogram": histogram(scores),
        }
    ]
    assert corpus("verify", folder / "_MANIFEST.json").returncode == 0


def _kill_when(cmd: list[str], ready: Callable[[], bool], limit: float = 120) -> bool:
    """Start `cmd`, SIGKILL it once `ready()` holds; False when it finished first."""
    proc = subprocess.Popen(
        cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + limit
    while proc.poll() is None and time.monotonic() < deadline:
        if ready():
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.002)
    proc.wait()
    return False


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*.parquet"))}


@pytest.fixture(scope="module")
def keep_top_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A config keeping the top 0.3 by a trained classifier (by partition key) of 2,600
    documents (3 tasks), 40 of them exact copies of high scorers."""
    folder = tmp_path_factory.mktemp("keep-top")
    texts = documents(2560)
    scores = Scorer(train(folder / "m"), "hq").many(texts)
    best = sorted(range(len(texts)), key=lambda i: -scores[i])[:40]
    texts += [texts[i] for i in best]
    table = f'[[filters.classifiers]]\nname = "edu"\nmodel = "{KEY}"\nkeep_top = 0.3\n'
    return setup(folder, texts, table), texts


def test_keep_top_keeps_the_top_share_of_the_deduplicated_documents(
    tmp_path: Path, keep_top_build: tuple[Path, list[str]]
) -> None:
    cfg, texts = keep_top_build
    root = tmp_path / "one"
    built_classifier(root, KEY, cfg.parent / "model.bin")
    manifest, folder = shard(cfg, root)
    scores = Scorer(cfg.parent / "model.bin", "hq").many(texts)
    unique = len(set(texts))
    assert manifest["duplicates"]["exact"] == len(texts) - unique == 40
    k = keep_count(0.3, unique)
    ranked = sorted((-s, i) for i, s in enumerate(scores) if texts.index(texts[i]) == i)
    expected = sorted(i for _s, i in ranked[:k])
    kept = rows(folder, manifest)
    assert [r["id"] for r in kept] == [f"d{i:05d}" for i in expected]
    assert [r["quality_edu"] for r in kept] == [scores[i] for i in expected]
    (entry,) = manifest["classifiers"]
    assert (entry["model"], entry["label"], entry["keep_top"], entry["scored"]) == (
        KEY,
        "hq",
        0.3,
        len(texts),
    )
    assert (entry["kept"], entry["dropped"], entry["score_at_cut"]) == (
        k,
        unique - k,
        -ranked[k - 1][0],
    )
    assert manifest["dropped"] == {"quality_edu": unique - k}
    assert manifest["documents_out"] == k


def test_keep_top_shards_are_the_same_for_two_workers_and_after_kills(
    tmp_path: Path, keep_top_build: tuple[Path, list[str]]
) -> None:
    cfg, _texts = keep_top_build
    roots = [tmp_path / name for name in ("one", "two", "killed")]
    for root in roots:
        built_classifier(root, KEY, cfg.parent / "model.bin")
    one, _folder = shard(cfg, roots[0], workers=1)
    two, _folder = shard(cfg, roots[1], workers=2)
    assert one == two and tree(roots[0] / "corpus") == tree(roots[1] / "corpus")
    root = roots[2]
    corpus("run", "--stage", "fetch", "--config", cfg, "--root", root)
    cmd = corpus_argv("run", "--stage", "shard", "--config", cfg, "--root", root, "--workers", 2)

    def tasks_done(n: int) -> Callable[[], bool]:
        return lambda: len(list((root / "work").glob("*/shard/tasks/*.done"))) >= n

    kills = [_kill_when(cmd, tasks_done(1)), _kill_when(cmd, tasks_done(2))]
    assert any(kills), "no kill landed inside the stage"
    final = corpus("run", "--stage", "shard", "--config", cfg, "--root", root)
    assert "resuming" in final.stderr
    assert tree(root / "corpus") == tree(roots[0] / "corpus")


@pytest.mark.parametrize(
    ("table", "change", "message"),
    [
        (f'model = "{KEY}"', None, f"classifier 'edu': {KEY} is not built"),
        ('model = "model.bin"\nlabel = "good"', None, "label 'good' is not one of"),
        ('model = "gone.bin"\nlabel = "hq"', None, "model file not found"),
        ('model = "model.bin"\nlabel = "hq"', "pin", "the model changed since the config"),
    ],
)
def test_a_model_that_cannot_be_used_stops_the_stage_in_one_line(
    tmp_path: Path, table: str, change: str | None, message: str
) -> None:
    cfg = setup(tmp_path, documents(20), f'[[filters.classifiers]]\nname = "edu"\n{table}\n')
    cfg.write_text(cfg.read_text() + "min_score = 0.5\n")
    root = tmp_path / "root"
    if change == "pin":
        pin = file_sha256(tmp_path / "model.bin")
        cfg.write_text(cfg.read_text() + f'model_sha256 = "{pin}"\n')
        corpus("run", "--stage", "fetch", "--config", cfg, "--root", root)
        model = tmp_path / "model.bin"
        model.write_bytes(model.read_bytes() + b"\0")
    else:
        corpus("run", "--stage", "fetch", "--config", cfg, "--root", root, check=False)
    done = corpus("run", "--stage", "shard", "--config", cfg, "--root", root, check=False)
    assert done.returncode == 64, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert not list((root / "work").glob("*/shard/tasks/*.done"))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A folder served over HTTP on loopback, and its URL."""
    folder = tmp_path / "served"
    folder.mkdir()
    handler = partial(_Quiet, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


def test_a_model_url_is_downloaded_once_into_the_raw_cache_and_checked(
    tmp_path: Path, served: tuple[Path, str]
) -> None:
    folder, base = served
    model = train(folder)
    pin = file_sha256(model)
    texts = documents(100)
    table = (
        f'[[filters.classifiers]]\nname = "edu"\nmodel = "{base}/model.bin?token=abc"\n'
        f'label = "hq"\nmin_score = 0.5\nmodel_sha256 = "{pin}"\n'
    )
    cfg = setup(tmp_path / "build", texts, table)
    manifest, out = shard(cfg, tmp_path / "root")
    assert (tmp_path / "root" / "raw" / "_models" / f"{pin}.bin").read_bytes() == model.read_bytes()
    (entry,) = manifest["classifiers"]
    assert (entry["model"], entry["model_sha256"]) == (f"{base}/model.bin", pin)
    scores = Scorer(model, "hq").many(texts)
    assert [r["quality_edu"] for r in rows(out, manifest)] == [s for s in scores if s >= 0.5]
    wrong = cfg.parent / "wrong.toml"
    wrong.write_text(cfg.read_text().replace(pin, "0" * 64), encoding="utf-8")
    corpus("run", "--stage", "fetch", "--config", wrong, "--root", tmp_path / "root")
    done = corpus(
        "run", "--stage", "shard", "--config", wrong, "--root", tmp_path / "root", check=False
    )
    error = done.stderr.strip().splitlines()[-1]  # after the download's progress line
    assert done.returncode == 64 and done.stderr.count("error") == 1, done.stderr
    assert f"serves a file with sha256 '{pin}', not the pinned" in error
    assert "token" not in done.stderr
    assert not (tmp_path / "root" / "raw" / "_models" / f"{'0' * 64}.bin").exists()


def test_a_model_url_with_credentials_is_refused_before_anything_runs(tmp_path: Path) -> None:
    table = (
        '[[filters.classifiers]]\nname = "edu"\nmodel = "https://me:hunter2@h.example/m.bin"\n'
        f'label = "hq"\nkeep_top = 0.5\nmodel_sha256 = "{"0" * 64}"\n'
    )
    cfg = setup(tmp_path, documents(5), table)
    done = corpus("run", "--stage", "fetch", "--config", cfg, "--root", tmp_path / "r", check=False)
    assert done.returncode == 64 and "has a user or password in it" in done.stderr, done.stderr
    assert "hunter2" not in done.stderr and not (tmp_path / "r" / "raw").exists()


def test_corpus_build_refuses_a_classifier_not_trained_on_its_root_before_any_stage(
    tmp_path: Path,
) -> None:
    table = f'[[filters.classifiers]]\nname = "edu"\nmodel = "{KEY}"\nkeep_top = 0.5\n'
    cfg = setup(tmp_path, documents(5), table)
    root = tmp_path / "root"
    root.mkdir()
    done = corpus("build", cfg, "--root", root, check=False)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 64 and len(lines) == 1, done.stderr
    assert f"classifier 'edu': {KEY} is not built" in lines[0]
    assert sorted(p.name for p in root.iterdir()) == []  # no raw, no instance, no run
