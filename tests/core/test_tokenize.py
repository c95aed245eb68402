"""The tokenize stage in-process: golden ids, EOS, dtype choice, resume, idempotence, verify.

`write_shards` / `tiny_docs` are the shard-folder fixture the other tokenize tests import: they
publish a shards folder in the shard stage's format (Parquet `id,text,source,license` + manifest)
from the real TinyStories sample, so the tokenize stage is tested on its own contract.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer

from corpus_assets.core.config import LoadedConfig, validate
from corpus_assets.core.errors import ConfigError, DataError, UpstreamMissing
from corpus_assets.core.stages.tokenize import read_shards, tokenize
from corpus_assets.core.stages.tokenize_pool import ShardTask, plan, read_marker, run_task
from corpus_assets.core.stages.tokenize_verify import verify_tokens
from corpus_assets.core.stages.verify import verify_path
from corpus_assets.core.store.atomic import write_json
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.progress import Progress, silent
from corpus_assets.core.text.tokenizer import (
    BytesEncoder,
    TokenizerInfo,
    load_encoder,
    resolve_tokenizer,
)

DATA = Path(__file__).resolve().parents[2] / "data"
TINY = DATA / "tinystories" / "TinyStoriesV2-GPT4-train.head10000lines.txt"
GPT2 = DATA / "tokenizers" / "gpt2" / "tokenizer.json"
SCHEMA = pa.schema(
    [("id", pa.string()), ("text", pa.string()), ("source", pa.string()), ("license", pa.string())]
)


# --- fixture helpers (also used by test_dataset.py and tests/cli/test_tokenize_cli.py) --------


def tiny_docs(limit: int | None = None) -> list[tuple[str, str]]:
    """(id, text) of the complete TinyStories stories (the truncated tail is dropped)."""
    parts = TINY.read_text(encoding="utf-8").split("<|endoftext|>")[:-1]
    texts = [t.strip() for t in parts if t.strip()]
    return [(f"tiny-{i:05d}", t) for i, t in enumerate(texts[:limit])]


def write_shards(
    folder: Path,
    docs: Sequence[tuple[str, str]],
    n_shards: int,
    cfg: LoadedConfig | None = None,
    row_group: int = 128,
) -> dict[str, Any]:
    """Publish `docs` as `n_shards` Parquet shards plus a shards `_MANIFEST.json` in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    per = -(-len(docs) // n_shards)
    entries = []
    for s in range(n_shards):
        chunk = docs[s * per : (s + 1) * per]
        table = pa.table(
            {
                "id": [d[0] for d in chunk],
                "text": [d[1] for d in chunk],
                "source": ["tiny"] * len(chunk),
                "license": ["cdla-sharing-1.0"] * len(chunk),
            },
            schema=SCHEMA,
        )
        path = folder / f"shard-{s:05d}.parquet"
        pq.write_table(table, path, compression="zstd", row_group_size=row_group)
        data = path.read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        entries.append({"name": path.name, "sha256": sha, "bytes": len(data), "rows": len(chunk)})
    manifest = {
        "kind": "shards",
        "build_id": cfg.build_id if cfg else "corpus/t/v1/000000000000",
        "config_sha256": cfg.sha256 if cfg else "0" * 64,
        "shards": entries,
        "documents_out": len(docs),
    }
    write_json(folder / "_MANIFEST.json", manifest)
    return manifest


def make_config(tmp: Path, tokenizer: dict[str, Any], name: str = "t") -> LoadedConfig:
    raw = {"dataset": name, "version": "v1", "tokenizer": tokenizer}
    return validate(raw, tmp)


def build(
    root: Path,
    tokenizer: dict[str, Any],
    docs: Sequence[tuple[str, str]],
    n_shards: int = 3,
    workers: int = 2,
) -> tuple[LoadedConfig, Layout, Path]:
    """Shards from `docs` under `root`, then the tokenize stage; returns cfg, layout, tokens dir."""
    cfg = make_config(root, tokenizer)
    layout = Layout(root)
    write_shards(layout.shards(cfg), docs, n_shards, cfg)
    tokenize(cfg, layout, workers, Progress("tokenize", silent))
    return cfg, layout, layout.tokens(cfg)


def tree_bytes(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


# --- encoders ---------------------------------------------------------------------------------


def test_gpt2_golden_ids(tmp_path: Path) -> None:
    info = resolve_tokenizer(make_config(tmp_path, {"id": "gpt2", "path": str(GPT2)}))
    assert (info.eos_id, info.vocab_size, info.dtype) == (50256, 50257, "uint16")
    assert info.sha256 == hashlib.sha256(GPT2.read_bytes()).hexdigest()
    ids, lengths = load_encoder(info).encode(
        pa.array(["Hello, my dog is cute", "", "<|endoftext|>"])
    )
    assert ids.tolist() == [15496, 11, 616, 3290, 318, 13779, 50256, 50256, 50256, 50256]
    assert lengths.tolist() == [7, 1, 2]
    assert ids.dtype == np.dtype("<u2")


def test_gpt2_batch_ids_equal_encode(tmp_path: Path) -> None:
    info = resolve_tokenizer(make_config(tmp_path, {"id": "gpt2", "path": str(GPT2)}))
    tok = Tokenizer.from_file(str(GPT2))
    texts = [t for _, t in tiny_docs(300)] + ["  leading spaces", "tab\there", "émoji 🙂 ok"]
    ids, lengths = load_encoder(info).encode(pa.array(texts))
    expected = [x for t in texts for x in [*tok.encode(t).ids, 50256]]
    assert ids.tolist() == expected
    assert lengths.tolist() == [len(tok.encode(t).ids) + 1 for t in texts]


def test_bytes_ids_and_eos() -> None:
    texts = pa.array(["héllo", "", "a\n", "🙂"])
    ids, lengths = BytesEncoder().encode(texts)
    expected = [*"héllo".encode(), 256, 256, 97, 10, 256, *"🙂".encode(), 256]
    assert ids.tolist() == expected
    assert lengths.tolist() == [7, 1, 3, 5]
    # a sliced array (non-zero offset) and large_string give the same ids
    sliced, _ = BytesEncoder().encode(pa.array(["zz", "héllo", ""]).slice(1))
    assert sliced.tolist() == [*"héllo".encode(), 256, 256]
    large, _ = BytesEncoder().encode(pa.array(["héllo", ""], type=pa.large_string()))
    assert large.tolist() == sliced.tolist()


def test_bytes_tokenizer_identity(tmp_path: Path) -> None:
    info = resolve_tokenizer(make_config(tmp_path, {"id": "bytes"}))
    assert (info.vocab_size, info.eos_id, info.dtype, info.sha256) == (257, 256, "uint16", None)


@pytest.mark.parametrize(
    ("extra", "eos", "vocab"),
    [
        ({}, 50256, 50257),
        ({"eos_id": 0}, 0, 50257),
        ({"eos_token": "!"}, 0, 50257),
        ({"eos_id": 70000}, 70000, 70001),
    ],
)
def test_eos_resolution(tmp_path: Path, extra: dict[str, Any], eos: int, vocab: int) -> None:
    info = resolve_tokenizer(make_config(tmp_path, {"id": "gpt2", "path": str(GPT2), **extra}))
    assert (info.eos_id, info.vocab_size) == (eos, vocab)
    assert info.dtype == ("uint16" if vocab <= 65536 else "uint32")


def test_eos_token_unknown(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"id": "gpt2", "path": str(GPT2), "eos_token": "<|nope|>"})
    with pytest.raises(ConfigError, match=r"eos_token '<\|nope\|>' is not in its vocabulary"):
        resolve_tokenizer(cfg)


def test_tokenizer_without_eos_names_its_special_tokens(tmp_path: Path) -> None:
    path = wordlevel(tmp_path, 10, specials=["[UNK]", "[PAD]"])
    with pytest.raises(ConfigError, match=r"no end-of-text token.*\[PAD\], \[UNK\]"):
        resolve_tokenizer(make_config(tmp_path, {"id": "wl", "path": str(path)}))


def test_relative_path_resolves_against_config_folder(tmp_path: Path) -> None:
    path = wordlevel(tmp_path / "tok", 10)
    cfg = make_config(tmp_path, {"id": "wl", "path": "tok/wordlevel.json"})
    assert resolve_tokenizer(cfg).file == str(path)


def test_missing_or_broken_tokenizer_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        resolve_tokenizer(make_config(tmp_path, {"id": "x", "path": "nope.json"}))
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"not a valid tokenizer\.json"):
        resolve_tokenizer(make_config(tmp_path, {"id": "x", "path": "bad.json"}))


@pytest.mark.parametrize(
    ("tokenizer", "message"),
    [
        ({"id": "bytes", "eos_id": 3}, "eos_id is 256"),
        ({"id": "bytes", "path": "x.json"}, "takes no path"),
        ({"id": "gpt2", "eos_id": 1, "eos_token": "x"}, "not both"),
    ],
)
def test_bad_tokenizer_config(tmp_path: Path, tokenizer: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_config(tmp_path, tokenizer)


def test_hub_name_offline_not_cached_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    cfg = make_config(tmp_path, {"id": "openai-community/gpt2"})
    with pytest.raises(ConfigError, match=r"'openai-community/gpt2'.*HF_HUB_OFFLINE.*\.path"):
        resolve_tokenizer(cfg)


def wordlevel(folder: Path, n_words: int, specials: Sequence[str] = ("<unk>", "</s>")) -> Path:
    """A WordLevel tokenizer over `n_words` synthetic words (+ specials), saved to `folder`."""
    from tokenizers import models, pre_tokenizers

    vocab = {s: i for i, s in enumerate(specials)}
    vocab.update({f"w{i}": len(specials) + i for i in range(n_words)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token=specials[0]))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(list(specials))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "wordlevel.json"
    tok.save(str(path))
    return path


# --- the stage --------------------------------------------------------------------------------


def test_uint32_when_vocab_exceeds_uint16(tmp_path: Path) -> None:
    path = wordlevel(tmp_path, 70_000)
    docs = [("a", "w1 w69999 w65536"), ("b", "w2 nope"), ("c", "")]
    _, _, out = build(tmp_path / "root", {"id": "wl", "path": str(path)}, docs, n_shards=2)
    m = json.loads((out / "_MANIFEST.json").read_text())
    assert (m["dtype"], m["vocab_size"], m["eos_id"]) == ("uint32", 70_002, 1)
    tokens = np.concatenate([np.fromfile(out / f"shard-0000{i}.bin", "<u4") for i in range(2)])
    assert tokens.tolist() == [3, 70001, 65538, 1, 4, 0, 1, 1]
    assert np.fromfile(out / "shard-00001.idx", "<u8").tolist() == [1]
    assert verify_tokens(out / "_MANIFEST.json", m) == []


def test_uint16_files_and_manifest(tmp_path: Path) -> None:
    docs = tiny_docs(200)
    cfg, layout, out = build(tmp_path / "root", {"id": "gpt2", "path": str(GPT2)}, docs)
    m = json.loads((out / "_MANIFEST.json").read_text())
    assert m["kind"] == "tokens" and m["dtype"] == "uint16" and m["eos_id"] == 50256
    assert m["tokenizer"] == {"id": "gpt2", "sha256": hashlib.sha256(GPT2.read_bytes()).hexdigest()}
    assert m["build_id"] == cfg.build_id and m["config_sha256"] == cfg.sha256
    shards_manifest = layout.shards(cfg) / "_MANIFEST.json"
    assert (out / m["shards_manifest"]).resolve() == shards_manifest.resolve()
    assert m["shards_manifest_sha256"] == hashlib.sha256(shards_manifest.read_bytes()).hexdigest()
    names = [f["name"] for f in m["files"]]
    assert names == [f"shard-0000{i}.{ext}" for i in range(3) for ext in ("bin", "idx")]
    assert sorted(p.name for p in out.iterdir()) == sorted([*names, "_MANIFEST.json"])
    tok = Tokenizer.from_file(str(GPT2))
    stream = np.concatenate([np.fromfile(out / f"shard-0000{i}.bin", "<u2") for i in range(3)])
    assert stream.tolist() == [x for _, t in docs for x in [*tok.encode(t).ids, 50256]]
    assert m["totals"] == {"documents": 200, "tokens": len(stream)}
    ends = np.fromfile(out / "shard-00000.idx", "<u8")
    assert len(ends) == 67 and stream[ends.astype(np.int64) - 1].tolist() == [50256] * 67
    assert not (layout.work(cfg, "tokenize") / "out").exists()
    assert not (layout.work(cfg, "tokenize") / "markers").exists()


@pytest.mark.parametrize(
    ("tokenizer", "workers"),
    [({"id": "gpt2", "path": str(GPT2)}, (1, 2, 8)), ({"id": "bytes"}, (1, 2, 3))],
)
def test_any_workers_byte_identical(
    tmp_path: Path, tokenizer: dict[str, Any], workers: tuple[int, ...]
) -> None:
    """In this process or in a pool of 2-3 (see test_plan): the same bytes."""
    docs = tiny_docs(300)
    outs = [build(tmp_path / str(w), tokenizer, docs, n_shards=4, workers=w)[2] for w in workers]
    assert all(tree_bytes(out) == tree_bytes(outs[0]) for out in outs[1:])


def test_idempotent_rerun(tmp_path: Path) -> None:
    cfg, layout, out = build(tmp_path, {"id": "bytes"}, tiny_docs(100))
    before = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.iterdir()}
    notes: list[str] = []
    first = tokenize(cfg, layout, 2, Progress("tokenize", silent))
    second = tokenize(cfg, layout, 2, Progress("tokenize", notes.append))
    assert first == second
    assert second.manifest == str((out / "_MANIFEST.json").relative_to(tmp_path))
    assert any("already built" in n for n in notes)
    assert {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.iterdir()} == before


def test_damaged_token_file_is_rebuilt(tmp_path: Path) -> None:
    cfg, layout, out = build(tmp_path, {"id": "bytes"}, tiny_docs(50))
    good = tree_bytes(out)
    with open(out / "shard-00001.bin", "r+b") as fh:
        fh.write(b"\xff\xff")
    tokenize(cfg, layout, 1, Progress("tokenize", silent))
    assert tree_bytes(out) == good


def test_resume_skips_marked_shards(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"id": "bytes"})
    layout = Layout(tmp_path)
    docs = tiny_docs(90)
    write_shards(layout.shards(cfg), docs, 3, cfg)
    shards = read_shards(layout.shards(cfg))
    info = resolve_tokenizer(cfg)
    work = layout.work(cfg, "tokenize")
    (work / "out").mkdir(parents=True)
    (work / "markers").mkdir()
    task = ShardTask(
        shard="shard-00001.parquet",
        shard_path=str(shards.folder / "shard-00001.parquet"),
        shard_sha256=shards.shards[1]["sha256"],
        rows=30,
        size=shards.shards[1]["bytes"],
        out_dir=str(work / "out"),
        marker=str(work / "markers" / "shard-00001.json"),
        tokenizer=info,
        batch_size=7,
    )
    run_task(task)
    assert read_marker(task) is not None
    (work / "out" / ".shard-00002.bin.tmp-999").write_bytes(b"left by a killed run")
    inode = (work / "out" / "shard-00001.bin").stat().st_ino
    notes: list[str] = []
    tokenize(cfg, layout, 2, Progress("tokenize", notes.append))
    out = layout.tokens(cfg)
    assert (out / "shard-00001.bin").stat().st_ino == inode  # not rewritten
    assert "resuming: 1 of 3 shards done" in " ".join(notes)
    assert not (out / ".shard-00002.bin.tmp-999").exists()
    _, _, reference = build(tmp_path / "ref", {"id": "bytes"}, docs)
    assert tree_bytes(out) == tree_bytes(reference)


def test_stale_marker_is_ignored(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"id": "bytes"})
    layout = Layout(tmp_path)
    markers = layout.work(cfg, "tokenize") / "markers"
    markers.mkdir(parents=True)
    (markers / "shard-00000.json").write_text(json.dumps({"key": {"shard": "other"}, "files": []}))
    write_shards(layout.shards(cfg), tiny_docs(20), 1, cfg)
    result = tokenize(cfg, layout, 1, Progress("tokenize", silent))
    assert result.documents == 20


def test_corrupted_shard_is_data_error_and_nothing_published(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"id": "bytes"})
    layout = Layout(tmp_path)
    write_shards(layout.shards(cfg), tiny_docs(40), 2, cfg)
    shard = layout.shards(cfg) / "shard-00001.parquet"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"shard-00001\.parquet: sha256 differs"):
        tokenize(cfg, layout, 2, Progress("tokenize", silent))
    assert not layout.tokens(cfg).exists()


def test_missing_shards_is_data_error(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"id": "bytes"})
    with pytest.raises(UpstreamMissing, match="materialize shards first: no shards manifest"):
        tokenize(cfg, Layout(tmp_path), 1, Progress("tokenize", silent))


def test_shard_rows_disagreeing_with_manifest(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"id": "bytes"})
    layout = Layout(tmp_path)
    manifest = write_shards(layout.shards(cfg), tiny_docs(40), 2, cfg)
    manifest["shards"][0]["rows"] += 1
    write_json(layout.shards(cfg) / "_MANIFEST.json", manifest)
    with pytest.raises(DataError, match="read 20 rows, the shards manifest says 21"):
        tokenize(cfg, layout, 2, Progress("tokenize", silent))
    assert not layout.tokens(cfg).exists()


def test_changed_tokenizer_file_is_refused(tmp_path: Path) -> None:
    path = wordlevel(tmp_path / "tok", 50)
    cfg, layout, _ = build(tmp_path, {"id": "wl", "path": str(path)}, [("a", "w1 w2")], 1)
    wordlevel(tmp_path / "tok", 60)
    with pytest.raises(DataError, match="its file changed"):
        tokenize(cfg, layout, 1, Progress("tokenize", silent))


def test_progress_reports_documents_and_bytes(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"id": "bytes"})
    layout = Layout(tmp_path)
    docs = tiny_docs(100)
    write_shards(layout.shards(cfg), docs, 2, cfg)
    progress = Progress("tokenize", silent)
    tokenize(cfg, layout, 2, progress)
    assert progress.docs == 100
    assert progress.bytes == sum(len(t.encode()) for _, t in docs)


# --- corpus verify ----------------------------------------------------------------------------


def test_verify_good_and_damaged(tmp_path: Path) -> None:
    _, _, out = build(tmp_path, {"id": "bytes"}, tiny_docs(60))
    assert verify_path(out) == []
    assert verify_path(out / "_MANIFEST.json") == []
    with open(out / "shard-00002.idx", "r+b") as fh:
        fh.write(b"\x00")
    assert any("shard-00002.idx: sha256 differs" in p for p in verify_path(out))


def test_verify_checks_rows_and_content(tmp_path: Path) -> None:
    cfg, layout, out = build(tmp_path, {"id": "bytes"}, tiny_docs(60))
    path = out / "_MANIFEST.json"
    m = json.loads(path.read_text())
    # the shard rows must equal the token documents
    shards_path = layout.shards(cfg) / "_MANIFEST.json"
    sm = json.loads(shards_path.read_text())
    sm["shards"][0]["rows"] = 999
    write_json(shards_path, sm)
    assert any("changed since the tokens were built" in p for p in verify_tokens(path, m))
    m["shards_manifest_sha256"] = hashlib.sha256(shards_path.read_bytes()).hexdigest()
    assert any("999 rows but 20 token documents" in p for p in verify_tokens(path, m))
    # a wrong dtype for the vocabulary, and totals that do not add up
    bad = {**m, "dtype": "uint32", "totals": {"documents": 1, "tokens": 1}}
    problems = " ".join(verify_tokens(path, bad))
    assert "needs uint16" in problems and "add up" in problems


def test_verify_finds_missing_eos(tmp_path: Path) -> None:
    """A token file rewritten consistently (digest updated) but without EOS is still caught."""
    _, _, out = build(tmp_path, {"id": "bytes"}, tiny_docs(10), n_shards=1)
    path = out / "_MANIFEST.json"
    m = json.loads(path.read_text())
    tokens = np.fromfile(out / "shard-00000.bin", "<u2")
    tokens[tokens == 256] = 32
    tokens.tofile(out / "shard-00000.bin")
    m["files"][0]["sha256"] = hashlib.sha256((out / "shard-00000.bin").read_bytes()).hexdigest()
    assert any("does not end with EOS" in p for p in verify_tokens(path, m))


def test_core_tokenize_imports_no_dagster_or_tokenizers() -> None:
    import subprocess
    import sys

    code = (
        "import sys, corpus_assets.core.stages.tokenize, corpus_assets.core.text.tokenizer;"
        "print(sorted(m for m in ('dagster', 'tokenizers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_null_text_is_data_error(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"id": "bytes"})
    layout = Layout(tmp_path)
    manifest = write_shards(layout.shards(cfg), tiny_docs(10), 2, cfg)
    path = layout.shards(cfg) / "shard-00001.parquet"
    table = pq.read_table(path)
    texts = pa.array([None, *table.column("text").to_pylist()[1:]], pa.string())
    pq.write_table(table.set_column(1, "text", texts), path)
    entry = manifest["shards"][1]
    entry.update(sha256=hashlib.sha256(path.read_bytes()).hexdigest(), bytes=path.stat().st_size)
    write_json(layout.shards(cfg) / "_MANIFEST.json", manifest)
    with pytest.raises(DataError, match=r"shard-00001\.parquet has a row with no text"):
        tokenize(cfg, layout, 2, Progress("tokenize", silent))
    assert not layout.tokens(cfg).exists()


def test_progress_lines_are_emitted(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"id": "bytes"})
    layout = Layout(tmp_path)
    write_shards(layout.shards(cfg), tiny_docs(300), 3, cfg)
    lines: list[str] = []
    tokenize(cfg, layout, 2, Progress("tokenize", lines.append, every=0.0))
    assert any(line.startswith("tokenize progress: ") for line in lines)
    assert lines[-1].startswith("tokenize done: 300 documents")


@pytest.mark.parametrize(
    ("tokenizer", "workers", "shards", "expected"),
    [
        ("gpt2", 1, 5, (1, 1)),
        ("gpt2", 2, 5, (1, 2)),  # one process, 2 encoding threads (measured best)
        ("gpt2", 2, 1, (1, 2)),
        ("gpt2", 8, 12, (2, 4)),
        ("gpt2", 8, 1, (1, 8)),
        ("gpt2", 10, 12, (3, 3)),
        ("bytes", 2, 5, (2, 1)),
        ("bytes", 4, 3, (3, 1)),
        ("bytes", 4, 0, (1, 1)),
    ],
)
def test_plan(tokenizer: str, workers: int, shards: int, expected: tuple[int, int]) -> None:
    info = TokenizerInfo(tokenizer, None, None, 50257, 50256)
    assert plan(info, workers, shards) == expected


@pytest.mark.parametrize("tokenizer", [{"id": "gpt2", "path": str(GPT2)}, {"id": "bytes"}])
def test_small_and_empty_shards(tmp_path: Path, tokenizer: dict[str, Any]) -> None:
    """Shards of one batch or none: the encoding stream crosses shard boundaries correctly."""
    from corpus_assets import TokenDataset

    docs = [("a", "one"), ("b", ""), ("c", "three words here")]
    _, _, out = build(tmp_path, tokenizer, docs, n_shards=4, workers=2)
    m = json.loads((out / "_MANIFEST.json").read_text())
    assert [f["documents"] for f in m["files"][::2]] == [1, 1, 1, 0]
    assert (out / "shard-00003.bin").stat().st_size == 0
    ds = TokenDataset(out)
    assert len(ds) == 3 and ds[1].tolist() == [m["eos_id"]]
    assert verify_tokens(out / "_MANIFEST.json", m) == []


def test_ids_match_encode_with_a_post_processor(tmp_path: Path) -> None:
    """add_special_tokens behaves as in `Tokenizer.encode(text)`: template tokens included."""
    from tokenizers import processors

    path = wordlevel(tmp_path, 20, specials=("<unk>", "</s>", "<s>"))
    tok = Tokenizer.from_file(str(path))
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 2), ("</s>", 1)]
    )
    tok.save(str(path))
    info = resolve_tokenizer(make_config(tmp_path, {"id": "wl", "path": str(path)}))
    texts = ["w1 w2", "", "w19 zzz"]
    ids, _ = load_encoder(info).encode(pa.array(texts))
    assert ids.tolist() == [x for t in texts for x in [*tok.encode(t).ids, 1]]
    assert ids.tolist()[:4] == [2, 4, 5, 1]  # <s> w1 w2 </s>, then EOS (</s> = 1)


def test_a_process_loads_one_tokenizer_once_wherever_its_file_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ray node without the shared root gets the tokenizer file at a new path for every
    shard: the same file (by sha256) is loaded once per process, another file again."""
    from corpus_assets.core.stages import tokenize_pool

    cfg = make_config(tmp_path, {"id": "gpt2", "path": str(GPT2)})
    layout = Layout(tmp_path)
    write_shards(layout.shards(cfg), tiny_docs(60), 2, cfg)
    shards = read_shards(layout.shards(cfg))
    info = resolve_tokenizer(cfg)
    loads: list[str | None] = []

    def counted(loaded: TokenizerInfo) -> Any:
        loads.append(loaded.file)
        return load_encoder(loaded)

    monkeypatch.setattr(tokenize_pool, "_encoder", None)
    monkeypatch.setattr(tokenize_pool, "load_encoder", counted)
    outputs = []
    for n, name in enumerate(["shard-00000.parquet", "shard-00001.parquet", "shard-00000.parquet"]):
        copy = tmp_path / f"moved-{n}" / "tokenizer.json"
        copy.parent.mkdir()
        copy.write_bytes(GPT2.read_bytes() + (b" " if n == 2 else b""))  # the third: other bytes
        moved = replace(info, file=str(copy), sha256=hashlib.sha256(copy.read_bytes()).hexdigest())
        out = tmp_path / f"out-{n}"
        out.mkdir()
        task = ShardTask(
            shard=name,
            shard_path=str(shards.folder / name),
            shard_sha256=next(s["sha256"] for s in shards.shards if s["name"] == name),
            rows=30,
            size=next(s["bytes"] for s in shards.shards if s["name"] == name),
            out_dir=str(out),
            marker=str(out / "marker.json"),
            tokenizer=moved,
            batch_size=7,
        )
        run_task(task)
        outputs.append((out / name.replace(".parquet", ".bin")).read_bytes())
    assert loads == [
        str(tmp_path / "moved-0" / "tokenizer.json"),
        str(tmp_path / "moved-2" / "tokenizer.json"),
    ]
    assert outputs[2] == outputs[0]  # the same ids: a trailing space changes no vocabulary
