"""The shard stage through the CLI: publish, verify, rerun, kill and resume, workers, licenses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support.corpus import corpus_argv, make_bench_corpus, run_corpus

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "data" / "tinystories" / "TinyStoriesV2-GPT4-train.head10000lines.txt"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


def corpus(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run_corpus(*args, environ=ENV, check=check)


def config(tmp: Path, body: str, name: str = "c.toml") -> Path:
    path = tmp / name
    head = 'dataset = "t"\nversion = "v1"\ntokenizer = {id = "bytes"}\n'
    path.write_text(head + body, encoding="utf-8")
    return path


def tiny_source(license: str = "cdla-sharing-1.0") -> str:
    return (
        f'[[sources]]\nname = "tiny"\nkind = "text"\npath = "{TINY}"\n'
        f'separator = "<|endoftext|>"\nlicense = "{license}"\n'
    )


@pytest.fixture(scope="module")
def bench_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_bench_corpus(tmp_path_factory.mktemp("bench") / "corpus", 4)


def bench_config(tmp: Path, data: Path) -> Path:
    return config(
        tmp,
        f'[[sources]]\nname = "bench"\nkind = "jsonl"\npath = "{data}/part-*.jsonl"\n'
        f'id_field = "id"\nlicense = "cdla-sharing-1.0"\n'
        "[shards]\ntarget_mb = 1.0\n",
    )


def build(cfg: Path, root: Path, workers: int = 2) -> dict[str, object]:
    corpus("run", "--stage", "fetch", "--config", str(cfg), "--root", str(root))
    out = corpus(
        "run",
        "--stage",
        "shard",
        "--config",
        str(cfg),
        "--root",
        str(root),
        "--workers",
        str(workers),
    )
    return json.loads(out.stdout)


def tree(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_tinystories_shards_publish_verify_and_rerun(tmp_path: Path) -> None:
    cfg = config(tmp_path, tiny_source())
    root = tmp_path / "root"
    summary = build(cfg, root)
    manifest = root / str(summary["manifest"])
    m = json.loads(manifest.read_text())
    assert m["kind"] == "shards" and m["documents_in"] == 1728
    assert m["duplicates"] == {"exact": 0, "near": 0}  # the sample has no duplicates
    assert summary["documents_out"] >= 1727 - 2
    assert "fetched_at" not in manifest.read_text() and "time" not in json.dumps(m).lower()
    rows = pq.read_table(manifest.parent / m["shards"][0]["name"])
    assert rows.column_names == ["id", "text", "source", "license"]
    assert (
        rows.column("id")[0].as_py().startswith("tiny-")
        and rows.column("source")[0].as_py() == "tiny"
    )
    assert corpus("verify", str(manifest)).returncode == 0
    before = {p: p.stat().st_mtime_ns for p in manifest.parent.iterdir()}
    again = json.loads(
        corpus("run", "--stage", "shard", "--config", str(cfg), "--root", str(root)).stdout
    )
    assert again["cached"] is True and again["documents_out"] == summary["documents_out"]
    assert {p: p.stat().st_mtime_ns for p in manifest.parent.iterdir()} == before


def test_verify_catches_a_changed_shard(tmp_path: Path) -> None:
    root = tmp_path / "root"
    manifest = root / str(build(config(tmp_path, tiny_source()), root)["manifest"])
    shard = manifest.parent / "shard-00000.parquet"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    proc = corpus("verify", str(manifest), check=False)
    assert proc.returncode == 65
    assert "shard-00000.parquet: sha256 differs" in proc.stderr


def test_disallowed_license_exits_65_before_anything(tmp_path: Path) -> None:
    cfg = config(tmp_path, tiny_source(license="cc-by-nc-4.0"))
    root = tmp_path / "root"
    corpus("run", "--stage", "fetch", "--config", str(cfg), "--root", str(root))
    proc = corpus("run", "--stage", "shard", "--config", str(cfg), "--root", str(root), check=False)
    assert proc.returncode == 65
    assert "'tiny'" in proc.stderr and "cc-by-nc-4.0" in proc.stderr and "cc0-1.0" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (root / "corpus").exists() and not (root / "work").exists()


def test_unfetched_source_exits_64_naming_raw(tmp_path: Path) -> None:
    cfg = config(tmp_path, tiny_source())
    proc = corpus(
        "run",
        "--stage",
        "shard",
        "--config",
        str(cfg),
        "--root",
        str(tmp_path / "root"),
        check=False,
    )
    assert proc.returncode == 64 and "materialize raw first: source" in proc.stderr


def test_raw_file_changed_after_fetch_exits_65(tmp_path: Path) -> None:
    cfg = config(tmp_path, tiny_source())
    root = tmp_path / "root"
    corpus("run", "--stage", "fetch", "--config", str(cfg), "--root", str(root))
    part = next((root / "raw").glob("tiny-*/part-00000.parquet"))
    part.write_bytes(part.read_bytes() + b"x")
    proc = corpus("run", "--stage", "shard", "--config", str(cfg), "--root", str(root), check=False)
    assert proc.returncode == 65 and "differ from the ledger" in proc.stderr
    assert not (root / "corpus").exists()


def test_workers_1_and_2_give_identical_bytes(tmp_path: Path, bench_corpus: Path) -> None:
    one, two = tmp_path / "w1", tmp_path / "w2"
    s1 = build(bench_config(tmp_path, bench_corpus), one, workers=1)
    s2 = build(bench_config(tmp_path, bench_corpus), two, workers=2)
    assert s1["shards"] == s2["shards"] and int(str(s1["shards"])) > 1
    assert tree(one / "corpus") == tree(two / "corpus")
    assert s1["duplicates"]["exact"] > 0 and s1["duplicates"]["near"] > 0  # type: ignore[index]


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
        time.sleep(0.005)
    proc.wait()
    return False


def test_killed_shard_resumes_byte_identical(tmp_path: Path, bench_corpus: Path) -> None:
    cfg = bench_config(tmp_path, bench_corpus)
    clean = tmp_path / "clean"
    build(cfg, clean)
    root = tmp_path / "killed"
    corpus("run", "--stage", "fetch", "--config", str(cfg), "--root", str(root))
    cmd = corpus_argv("run", "--stage", "shard", "--config", cfg, "--root", root, "--workers", 2)

    def tasks_done(n: int) -> Callable[[], bool]:
        return lambda: len(list((root / "work").glob("*/shard/tasks/*.done"))) >= n

    def writing() -> bool:
        return any((root / "work").glob("*/shard/staging/shard-*.parquet"))

    kills = [
        _kill_when(cmd, tasks_done(1)),
        _kill_when(cmd, tasks_done(2)),
        _kill_when(cmd, writing),
    ]
    assert any(kills), "no kill landed inside the stage"
    final = corpus("run", "--stage", "shard", "--config", str(cfg), "--root", str(root))
    assert "resuming" in final.stderr or not kills[1]
    assert tree(root / "corpus") == tree(clean / "corpus")
    assert not list((root / "work").glob("*/shard"))


def test_a_partial_copy_keeps_only_its_new_paragraphs(tmp_path: Path) -> None:
    stories = [s.strip() for s in TINY.read_text(encoding="utf-8").split("<|endoftext|>")]
    story = max(stories, key=len)
    speech = "LORENZO.\nLeave holloaing, man. Here! The moon shines bright: in such a night."
    notice = "The committee met on Tuesday to review the budget for the new library wing again."
    words = story.split(" ")
    for i in range(0, len(words), 50):
        words[i] = "very"
    docs = {
        "a": story,
        "notice": notice,
        "quoted": f"{story}\n\n{speech}",  # the story whole, then a paragraph of its own
        "edited": "Reposted: " + " ".join(words),  # an edited copy: dropped
        "joined": f"{notice}\n\n{story}",  # nothing new: both parts are kept documents
        "again": f"{speech}\n\n{story}",  # its cut is the one "quoted" left: dropped
    }
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps({"id": k, "text": v}) + "\n" for k, v in docs.items()))
    source = f'[[sources]]\nname = "d"\nkind = "jsonl"\npath = "{data}"\nid_field = "id"\n'
    source += 'license = "cc0-1.0"\n'
    texts = {}
    for partial in ("true", "false"):
        root = tmp_path / partial
        summary = build(config(tmp_path, f"{source}[dedup]\npartial = {partial}\n"), root)
        manifest = root / str(summary["manifest"])
        m = json.loads(manifest.read_text())
        rows = pq.read_table(manifest.parent / m["shards"][0]["name"])
        texts[partial] = dict(zip(rows["id"].to_pylist(), rows["text"].to_pylist(), strict=True))
        assert corpus("verify", str(manifest)).returncode == 0
        assert summary["partial_copies"] == m["partial_copies"] == (1 if partial == "true" else 0)
        assert m["duplicates"] == {"exact": 0, "near": 3 if partial == "true" else 4}
    assert texts["true"] == {"a": story, "notice": notice, "quoted": speech}
    assert texts["false"] == {"a": story, "notice": notice}


def test_copies_that_differ_only_in_pii_are_exact_duplicates(tmp_path: Path) -> None:
    letter = "Thank you for your order. We will ship it within three days of payment. Write to {}."
    docs = [
        {"id": "first", "text": letter.format("alice@example.com")},
        {"id": "second", "text": letter.format("bob.smith@mail.example.org")},
        {"id": "other", "text": letter.format("the office").replace("three", "five")},
    ]
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in docs))
    source = f'[[sources]]\nname = "d"\nkind = "jsonl"\npath = "{data}"\nid_field = "id"\n'
    summary = build(config(tmp_path, source + 'license = "cc0-1.0"\n'), tmp_path / "root")
    manifest = tmp_path / "root" / str(summary["manifest"])
    m = json.loads(manifest.read_text())
    rows = pq.read_table(manifest.parent / m["shards"][0]["name"]).to_pylist()
    assert [r["id"] for r in rows] == ["first", "other"]
    assert rows[0]["text"] == letter.format("<EMAIL>")
    assert m["duplicates"]["exact"] == 1 and m["pii"]["email"] == 1


def test_filters_that_drop_every_document_are_exit_65_and_publish_nothing(tmp_path: Path) -> None:
    cfg = config(tmp_path, tiny_source() + "[filters]\nmin_chars = 1000000\n")
    root = tmp_path / "root"
    corpus("run", "--stage", "fetch", "--config", str(cfg), "--root", str(root))
    out = corpus("run", "--stage", "shard", "--config", str(cfg), "--root", str(root), check=False)
    assert out.returncode == 65, out.stderr
    (line,) = [x for x in out.stderr.splitlines() if "error" in x]
    assert line.startswith("corpus run: error: no document survived the filters: ")
    fetched = json.loads(next((root / "raw").glob("*/_SOURCE.json")).read_text())["documents"]
    assert f"{fetched:,} too_few_chars (of {fetched:,})" in line
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert not (root / "corpus").exists() or not list((root / "corpus").rglob("_MANIFEST.json"))
    tokenize = corpus(
        "run", "--stage", "tokenize", "--config", str(cfg), "--root", str(root), check=False
    )
    assert tokenize.returncode == 64 and "materialize shards first" in tokenize.stderr


def test_one_huge_document_is_dropped_and_nothing_published(tmp_path: Path) -> None:
    """A 30 MB JSON line beside a good document: dropped as too_many_chars before its words are
    split; alone, it leaves no document (exit 65). Its memory: bench/bench_big_document.py."""
    big = "a quiet story about a cat. " * 1_200_000
    good = "A small story about a cat and a dog who walked to the river one quiet morning."
    (tmp_path / "in.jsonl").write_text(
        json.dumps({"text": big}) + "\n" + json.dumps({"text": good}) + "\n", encoding="utf-8"
    )
    source = '[[sources]]\nname = "one"\nkind = "jsonl"\npath = "in.jsonl"\nlicense = "mit"\n'
    out = build(config(tmp_path, source + "[licenses]\nallow = ['mit']\n"), tmp_path / "root")
    assert (out["documents_in"], out["documents_out"]) == (2, 1)
    assert out["dropped"] == {"too_many_chars": 1}

    (tmp_path / "in.jsonl").write_text(json.dumps({"text": big}) + "\n", encoding="utf-8")
    cfg = config(tmp_path, source.replace('"one"', '"alone"') + "[licenses]\nallow = ['mit']\n")
    corpus("run", "--stage", "fetch", "--config", str(cfg), "--root", str(tmp_path / "root"))
    alone = corpus(
        "run", "--stage", "shard", "--config", str(cfg), "--root", str(tmp_path / "root"),
        check=False,
    )  # fmt: skip
    assert alone.returncode == 65, alone.stderr
    assert "no document survived the filters: 1 too_many_chars (of 1)" in alone.stderr
