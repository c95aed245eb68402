"""`corpus run --stage fetch` in a subprocess: the raw cache, the ledger, idempotent reruns."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

CorpusRunner = Callable[..., subprocess.CompletedProcess[str]]
WriteConfig = Callable[[Path, Mapping[str, Any]], Path]

TINYSTORIES = "tinystories/TinyStoriesV2-GPT4-train.head10000lines.txt"
SHAKESPEARE = "shakespeare/plays.jsonl"
EOT = "<|endoftext|>"


# --- helpers -------------------------------------------------------------------------------------


def config(*sources: dict[str, Any], dataset: str = "test") -> dict[str, Any]:
    return {
        "dataset": dataset,
        "version": "v1",
        "tokenizer": {"id": "bytes"},
        "sources": list(sources),
    }


def source_key(spec: Mapping[str, Any]) -> str:
    """`<name>-<sha256(canonical spec)[:12]>`, computed independently of the package."""
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"{spec['name']}-{hashlib.sha256(canonical.encode('utf-8')).hexdigest()[:12]}"


def published(root: Path) -> list[str]:
    """Published raw source folders (staging, locks and caches start with a dot)."""
    raw = root / "raw"
    if not raw.is_dir():
        return []
    return sorted(p.name for p in raw.iterdir() if p.is_dir() and not p.name.startswith("."))


def ledger(root: Path) -> list[dict[str, Any]]:
    path = root / "raw" / "LEDGER.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def rows(root: Path, key: str) -> list[dict[str, Any]]:
    parts = sorted((root / "raw" / key).glob("part-*.parquet"))
    assert parts, f"no parts in raw/{key}"
    return [r for p in parts for r in pq.read_table(p).to_pylist()]


def snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    """(inode, mtime_ns, size) of every file under raw/ except lock files."""
    out = {}
    for path in sorted((root / "raw").rglob("*")):
        if path.is_file() and ".locks" not in path.parts:
            st = path.stat()
            out[str(path.relative_to(root))] = (st.st_ino, st.st_mtime_ns, st.st_size)
    return out


def run_fetch(
    corpus: CorpusRunner, config_path: Path, root: Path, **kw: Any
) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    out = corpus("run", "--stage", "fetch", "--config", config_path, "--root", root, **kw)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    return json.loads(out.stdout), out


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def docs(n: int, prefix: str = "doc") -> list[dict[str, Any]]:
    return [{"text": f"{prefix} number {i}: some words here", "n": i} for i in range(n)]


# --- TinyStories (text + separator) and Shakespeare (jsonl + id_field) ---------------------------


@pytest.fixture(scope="module")
def repo_fetch(
    tmp_path_factory: pytest.TempPathFactory,
    repo_data: Path,
    write_config: WriteConfig,
    corpus: CorpusRunner,
) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("repo-fetch")
    tiny = {
        "name": "tinystories",
        "kind": "text",
        "path": str(repo_data / TINYSTORIES),
        "separator": EOT,
        "license": "cdla-sharing-1.0",
    }
    plays = {
        "name": "shakespeare",
        "kind": "jsonl",
        "path": str(repo_data / SHAKESPEARE),
        "id_field": "id",
        "license": "public-domain",
    }
    cfg = write_config(base / "ts.toml", config(tiny, plays, dataset="tinystories"))
    root = base / "root"
    summary, out = run_fetch(corpus, cfg, root)
    return {
        "root": root,
        "config": cfg,
        "summary": summary,
        "stderr": out.stderr,
        "tiny": tiny,
        "plays": plays,
        "data": repo_data,
    }


def test_fetch_publishes_one_raw_folder_per_source(repo_fetch: dict[str, Any]) -> None:
    root = repo_fetch["root"]
    tiny_key, plays_key = source_key(repo_fetch["tiny"]), source_key(repo_fetch["plays"])
    assert published(root) == sorted([tiny_key, plays_key])
    for key in (tiny_key, plays_key):
        names = sorted(p.name for p in (root / "raw" / key).iterdir())
        assert names == ["_SOURCE.json", "part-00000.parquet"]
    assert list((root / "raw" / ".staging").iterdir()) == []
    assert not list((root / "raw").glob(".*tmp*"))
    summary = repo_fetch["summary"]
    assert summary["stage"] == "fetch"
    assert summary["stage_key"].endswith("/fetch")
    assert summary["stage_key"].startswith("corpus/tinystories/v1/")
    assert [(s["source_key"], s["cached"]) for s in summary["sources"]] == [
        (tiny_key, False),
        (plays_key, False),
    ]


def test_text_source_splits_on_the_separator(repo_fetch: dict[str, Any]) -> None:
    text = (repo_fetch["data"] / TINYSTORIES).read_text("utf-8")
    expected = [part.strip() for part in text.split(EOT) if part.strip()]
    key = source_key(repo_fetch["tiny"])
    got = rows(repo_fetch["root"], key)
    assert len(got) == len(expected) > 1000
    assert [r["text"] for r in got] == expected
    assert [r["id"] for r in got] == [f"{key}:{i}" for i in range(len(expected))]
    assert {r["source"] for r in got} == {"tinystories"}
    assert {r["license"] for r in got} == {"cdla-sharing-1.0"}
    assert repo_fetch["summary"]["sources"][0]["documents"] == len(expected)


def test_jsonl_source_keeps_its_own_ids_and_other_fields(repo_fetch: dict[str, Any]) -> None:
    lines = (repo_fetch["data"] / SHAKESPEARE).read_text("utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    got = rows(repo_fetch["root"], source_key(repo_fetch["plays"]))
    assert [r["id"] for r in got] == [str(r["id"]) for r in records]
    assert [r["text"] for r in got] == [r["text"] for r in records]
    for row, record in zip(got, records, strict=True):
        assert json.loads(row["meta"]) == {
            k: v for k, v in record.items() if k not in ("id", "text")
        }
    assert {r["license"] for r in got} == {"public-domain"}


def test_source_record_and_ledger(repo_fetch: dict[str, Any]) -> None:
    root = repo_fetch["root"]
    entries = ledger(root)
    assert [e["source_key"] for e in entries] == [
        source_key(repo_fetch["tiny"]),
        source_key(repo_fetch["plays"]),
    ]
    for entry, spec in zip(entries, (repo_fetch["tiny"], repo_fetch["plays"]), strict=True):
        folder = root / "raw" / entry["source_key"]
        record = json.loads((folder / "_SOURCE.json").read_text("utf-8"))
        assert record["source_key"] == entry["source_key"]
        assert record["license"] == entry["license"] == spec["license"]
        assert record["spec"] == spec
        assert record["documents"] == entry["documents"] == len(rows(root, entry["source_key"]))
        input_sha = hashlib.sha256(Path(spec["path"]).read_bytes()).hexdigest()
        assert record["input_sha256"] == entry["input_sha256"] == input_sha
        assert record["files"] == entry["files"]
        for f in entry["files"]:
            data = (folder / f["name"]).read_bytes()
            assert f["bytes"] == len(data)
            assert f["sha256"] == hashlib.sha256(data).hexdigest()
        assert entry["fetched_at"]
        assert not any(str(root) in json.dumps(v) for k, v in entry.items() if k != "fetched_at")


def test_verify_passes_on_the_raw_cache(repo_fetch: dict[str, Any], corpus: CorpusRunner) -> None:
    for key in published(repo_fetch["root"]):
        out = corpus("verify", repo_fetch["root"] / "raw" / key)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("ok")


def test_verify_catches_a_tampered_part(
    repo_fetch: dict[str, Any], corpus: CorpusRunner, tmp_path: Path
) -> None:
    key = source_key(repo_fetch["plays"])
    copy = shutil.copytree(repo_fetch["root"] / "raw" / key, tmp_path / key)
    part = copy / "part-00000.parquet"
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0xFF
    part.write_bytes(bytes(data))
    out = corpus("verify", copy)
    assert out.returncode == 65
    assert "part-00000.parquet" in out.stderr
    assert "sha256" in out.stderr
    part.unlink()
    out = corpus("verify", copy)
    assert out.returncode == 65
    assert "missing" in out.stderr


def test_second_run_is_a_no_op(repo_fetch: dict[str, Any], corpus: CorpusRunner) -> None:
    root = repo_fetch["root"]
    before = snapshot(root)
    ledger_before = (root / "raw" / "LEDGER.jsonl").read_bytes()
    summary, out = run_fetch(corpus, repo_fetch["config"], root)
    assert snapshot(root) == before  # same inodes, mtimes and sizes: nothing rewritten
    assert (root / "raw" / "LEDGER.jsonl").read_bytes() == ledger_before
    assert [s["cached"] for s in summary["sources"]] == [True, True]
    assert [s["documents"] for s in summary["sources"]] == [
        s["documents"] for s in repo_fetch["summary"]["sources"]
    ]
    assert summary["stage_key"] == repo_fetch["summary"]["stage_key"]
    assert out.stderr.count("already in raw/") == 2
    assert "fetching source" not in out.stderr


# --- generated inputs ----------------------------------------------------------------------------


def test_jsonl_without_id_field_gets_row_ids(
    tmp_path: Path, data_root: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    path = tmp_path / "in.jsonl"
    records = docs(5)
    path.write_text(
        "\n".join(json.dumps(r) for r in records[:2])
        + "\n\n   \n"
        + "".join(json.dumps(r) + "\n" for r in records[2:])
    )
    spec = {"name": "gen", "kind": "jsonl", "path": str(path), "license": "mit"}
    summary, _ = run_fetch(corpus, write_config(tmp_path / "c.json", config(spec)), data_root)
    key = source_key(spec)
    got = rows(data_root, key)
    assert [r["id"] for r in got] == [f"{key}:{i}" for i in range(5)]  # blank lines skipped
    assert [r["text"] for r in got] == [r["text"] for r in records]
    assert [json.loads(r["meta"]) for r in got] == [{"n": i} for i in range(5)]
    assert summary["documents"] == 5


def test_text_field_and_numeric_id_field(
    tmp_path: Path, data_root: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", [{"body": f"b{i}", "uid": 100 + i} for i in range(3)])
    spec = {
        "name": "gen",
        "kind": "jsonl",
        "path": str(path),
        "license": "mit",
        "text_field": "body",
        "id_field": "uid",
    }
    run_fetch(corpus, write_config(tmp_path / "c.json", config(spec)), data_root)
    got = rows(data_root, source_key(spec))
    assert [(r["id"], r["text"], r["meta"]) for r in got] == [
        ("100", "b0", "{}"),
        ("101", "b1", "{}"),
        ("102", "b2", "{}"),
    ]


def test_parquet_source(
    tmp_path: Path, data_root: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    table = pa.table(
        {
            "text": [f"parquet doc {i}" for i in range(5000)],
            "doc_id": [f"p{i}" for i in range(5000)],
            "score": [i / 2 for i in range(5000)],
        }
    )
    pq.write_table(table, tmp_path / "in.parquet", row_group_size=1000)
    spec = {
        "name": "pq",
        "kind": "parquet",
        "path": "in.parquet",
        "license": "cc-by-4.0",
        "id_field": "doc_id",
    }
    summary, _ = run_fetch(corpus, write_config(tmp_path / "c.toml", config(spec)), data_root)
    got = rows(data_root, source_key(spec))
    assert [r["id"] for r in got] == [f"p{i}" for i in range(5000)]
    assert [r["text"] for r in got] == table.column("text").to_pylist()
    assert json.loads(got[7]["meta"]) == {"score": 3.5}
    assert summary["documents"] == 5000


def test_text_folder_is_one_document_per_file(
    tmp_path: Path, data_root: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    folder = tmp_path / "texts"
    (folder / "sub").mkdir(parents=True)
    (folder / "b.txt").write_text("  second file\n")
    (folder / "a.txt").write_text("first file\nwith two lines\n")
    (folder / "sub" / "c.txt").write_text("third, nested")
    (folder / ".hidden").write_text("ignored")
    (folder / "empty.txt").write_text("\n \n")
    spec = {"name": "texts", "kind": "text", "path": "texts", "license": "mit"}
    run_fetch(corpus, write_config(tmp_path / "c.toml", config(spec)), data_root)
    got = rows(data_root, source_key(spec))
    assert [r["text"] for r in got] == [
        "first file\nwith two lines",
        "second file",
        "third, nested",
    ]
    assert [json.loads(r["meta"])["file"] for r in got] == ["a.txt", "b.txt", "c.txt"]
    record = json.loads((data_root / "raw" / source_key(spec) / "_SOURCE.json").read_text())
    assert [i["name"] for i in record["inputs"]] == ["a.txt", "b.txt", "empty.txt", "sub/c.txt"]


def test_glob_path(
    tmp_path: Path, data_root: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    write_jsonl(tmp_path / "d" / "b.jsonl", docs(2, "b"))
    write_jsonl(tmp_path / "d" / "a.jsonl", docs(3, "a"))
    (tmp_path / "d" / "notes.txt").write_text("not matched")
    spec = {"name": "g", "kind": "jsonl", "path": "d/*.jsonl", "license": "mit"}
    run_fetch(corpus, write_config(tmp_path / "c.toml", config(spec)), data_root)
    got = rows(data_root, source_key(spec))
    assert [r["text"].split(" ")[0] for r in got] == ["a", "a", "a", "b", "b"]


@pytest.mark.parametrize("kind", ["jsonl", "text"])
def test_limit(
    kind: str, tmp_path: Path, data_root: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    if kind == "jsonl":
        path = write_jsonl(tmp_path / "in.jsonl", docs(50))
    else:
        path = tmp_path / "in.txt"
        path.write_text(EOT.join(f"story {i}" for i in range(50)))
    spec: dict[str, Any] = {"name": "lim", "kind": kind, "path": str(path), "license": "mit"}
    spec |= {"limit": 7} | ({"separator": EOT} if kind == "text" else {})
    summary, _ = run_fetch(corpus, write_config(tmp_path / "c.json", config(spec)), data_root)
    got = rows(data_root, source_key(spec))
    assert len(got) == 7
    assert got[0]["text"].endswith("0" if kind == "text" else "some words here")
    assert got[6]["text"].startswith("story 6" if kind == "text" else "doc number 6")
    assert summary["documents"] == 7
    assert ledger(data_root)[0]["documents"] == 7


def test_relative_paths_resolve_against_the_config_folder(
    tmp_path: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    write_jsonl(tmp_path / "project" / "data" / "in.jsonl", docs(3))
    spec = {"name": "rel", "kind": "jsonl", "path": "data/in.jsonl", "license": "mit"}
    cfg = write_config(tmp_path / "project" / "corpus.toml", config(spec))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = corpus("run", "--stage", "fetch", "--config", cfg, "--root", "root", cwd=elsewhere)
    assert out.returncode == 0, out.stderr
    assert published(elsewhere / "root") == [source_key(spec)]  # --root is relative to cwd
    assert len(rows(elsewhere / "root", source_key(spec))) == 3


def test_corpus_root_environment_variable(
    tmp_path: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    spec = {"name": "env", "kind": "jsonl", "path": "in.jsonl", "license": "mit"}
    write_jsonl(tmp_path / "in.jsonl", docs(2))
    cfg = write_config(tmp_path / "c.json", config(spec))
    out = corpus(
        "run", "--stage", "fetch", "--config", cfg, env={"CORPUS_ROOT": str(tmp_path / "envroot")}
    )
    assert out.returncode == 0, out.stderr
    assert published(tmp_path / "envroot") == [source_key(spec)]


def test_sha256_pin_that_matches(
    tmp_path: Path, data_root: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", docs(4))
    pin = hashlib.sha256(path.read_bytes()).hexdigest()
    spec = {"name": "pinned", "kind": "jsonl", "path": "in.jsonl", "license": "mit", "sha256": pin}
    summary, _ = run_fetch(corpus, write_config(tmp_path / "c.json", config(spec)), data_root)
    assert summary["documents"] == 4
    assert ledger(data_root)[0]["input_sha256"] == pin


def test_sha256_pin_of_a_folder_is_the_digest_of_its_listing(
    tmp_path: Path, data_root: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    a = write_jsonl(tmp_path / "d" / "a.jsonl", docs(2, "a"))
    b = write_jsonl(tmp_path / "d" / "z" / "b.jsonl", docs(2, "b"))
    listing = "".join(
        f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {name}\n"
        for p, name in ((a, "a.jsonl"), (b, "z/b.jsonl"))
    )
    pin = hashlib.sha256(listing.encode()).hexdigest()
    spec = {"name": "dir", "kind": "jsonl", "path": "d", "license": "mit", "sha256": pin}
    summary, _ = run_fetch(corpus, write_config(tmp_path / "c.json", config(spec)), data_root)
    assert summary["documents"] == 4


def test_two_configs_sharing_a_source_share_its_raw_folder(
    tmp_path: Path, data_root: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    write_jsonl(tmp_path / "shared.jsonl", docs(10))
    write_jsonl(tmp_path / "own.jsonl", docs(3, "own"))
    shared = {"name": "shared", "kind": "jsonl", "path": "shared.jsonl", "license": "mit"}
    own = {"name": "own", "kind": "jsonl", "path": "own.jsonl", "license": "mit"}
    first = write_config(tmp_path / "a.json", config(shared, dataset="alpha"))
    # same spec, other key order, other dataset, an extra source: still the same raw folder
    second = write_config(
        tmp_path / "b.toml", config(own, dict(reversed(shared.items())), dataset="beta")
    )
    run_fetch(corpus, first, data_root)
    before = snapshot(data_root)
    summary, _ = run_fetch(corpus, second, data_root)
    assert published(data_root) == sorted([source_key(shared), source_key(own)])
    assert [s["cached"] for s in summary["sources"]] == [False, True]
    assert sorted(e["source_key"] for e in ledger(data_root)) == sorted(published(data_root))
    after = snapshot(data_root)
    assert {k: v for k, v in after.items() if source_key(shared) in k} == {
        k: v for k, v in before.items() if source_key(shared) in k
    }


def test_a_changed_input_is_not_silently_reused(
    tmp_path: Path, data_root: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", docs(3))
    spec = {"name": "moving", "kind": "jsonl", "path": "in.jsonl", "license": "mit"}
    cfg = write_config(tmp_path / "c.json", config(spec))
    run_fetch(corpus, cfg, data_root)
    before = snapshot(data_root)
    write_jsonl(path, docs(4))
    out = corpus("run", "--stage", "fetch", "--config", cfg, "--root", data_root)
    assert out.returncode == 65
    assert "changed since it was fetched" in out.stderr
    assert snapshot(data_root) == before


def _hf(tmp_path: Path, path: str, **extra: Any) -> dict[str, Any]:
    return {"name": "hub", "kind": "hf", "path": path, "license": "apache-2.0", **extra}


def test_hf_source_with_local_jsonl(
    tmp_path: Path, data_root: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    write_jsonl(tmp_path / "local.jsonl", docs(6))
    spec = _hf(tmp_path, "local.jsonl")
    summary, _ = run_fetch(
        corpus,
        write_config(tmp_path / "c.toml", config(spec)),
        data_root,
        env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf-home")},
    )
    key = source_key(spec)
    got = rows(data_root, key)
    assert [r["id"] for r in got] == [f"{key}:{i}" for i in range(6)]
    assert [r["text"] for r in got] == [d["text"] for d in docs(6)]
    assert summary["documents"] == 6
    record = json.loads((data_root / "raw" / key / "_SOURCE.json").read_text())
    assert (
        record["input_sha256"]
        == hashlib.sha256((tmp_path / "local.jsonl").read_bytes()).hexdigest()
    )


def test_hf_source_with_local_parquet_glob_and_pin(
    tmp_path: Path, data_root: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    for n in range(2):
        pq.write_table(
            pa.table(
                {
                    "content": [f"file {n} doc {i}" for i in range(3)],
                    "key": [10 * n + i for i in range(3)],
                }
            ),
            tmp_path / f"train-{n}.parquet",
        )
    listing = "".join(
        f"{hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()}  {name}\n"
        for name in ("train-0.parquet", "train-1.parquet")
    )
    spec = _hf(
        tmp_path,
        "train-*.parquet",
        text_field="content",
        id_field="key",
        sha256=hashlib.sha256(listing.encode()).hexdigest(),
    )
    summary, _ = run_fetch(
        corpus,
        write_config(tmp_path / "c.toml", config(spec)),
        data_root,
        env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf-home")},
    )
    got = rows(data_root, source_key(spec))
    assert [r["id"] for r in got] == ["0", "1", "2", "10", "11", "12"]
    assert got[4]["text"] == "file 1 doc 1"
    assert summary["documents"] == 6


def test_hf_hub_id_offline_is_transient(
    tmp_path: Path, data_root: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    spec = _hf(tmp_path, "no-such-org/no-such-dataset")
    out = corpus(
        "run",
        "--stage",
        "fetch",
        "--config",
        write_config(tmp_path / "c.toml", config(spec)),
        "--root",
        data_root,
        env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf-home")},
    )
    assert out.returncode == 75, out.stderr
    assert "no-such-org/no-such-dataset" in out.stderr
    assert published(data_root) == []
    assert ledger(data_root) == []


def test_fetch_does_not_write_outside_the_data_root(
    tmp_path: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    inputs = tmp_path / "inputs"
    write_jsonl(inputs / "in.jsonl", docs(3))
    spec = {"name": "s", "kind": "jsonl", "path": "in.jsonl", "license": "mit"}
    cfg = write_config(inputs / "c.json", config(spec))
    os.chmod(inputs, 0o555)
    try:
        before = sorted(p.name for p in inputs.iterdir())
        run_fetch(corpus, cfg, tmp_path / "root", cwd=tmp_path)
        assert sorted(p.name for p in inputs.iterdir()) == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["inputs", "root"]
    finally:
        os.chmod(inputs, 0o755)
