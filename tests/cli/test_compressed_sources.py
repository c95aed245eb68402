"""Compressed JSONL and text sources (gzip, zstd, bzip2, xz), through `corpus run`.

Each variant lives in its own folder as `in/<file>` beside an identical config whose source path
is the folder `in`, so every variant has the same config, source key and document ids as the
plain file: the raw documents and the shards must come out byte for byte the same.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import json
import lzma
import re
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import zstandard

CorpusRunner = Callable[..., subprocess.CompletedProcess[str]]
WriteConfig = Callable[[Path, Mapping[str, Any]], Path]

EOT = "<|endoftext|>"
COMPRESS: dict[str, Callable[[bytes], bytes]] = {
    ".gz": gzip.compress,
    ".zst": lambda data: zstandard.ZstdCompressor(write_checksum=True).compress(data),
    ".bz2": bz2.compress,
    ".xz": lzma.compress,
}


def _documents(n: int = 400) -> list[dict[str, Any]]:
    """Varied English-like documents, some repeated (dedup has work), a few non-ASCII."""
    words = ["the", "a", "small", "fox", "river", "stone", "light", "ran", "over", "under"]
    words += ["quietly", "bright", "cold", "☃", "é", "日本"]
    docs = []
    for i in range(n):
        body = " ".join(words[(i * 7 + j * 3) % len(words)] for j in range(40 + i % 90))
        text = f"Story {i % 350}. {body}. It ended well, as stories {i % 350} do."
        docs.append({"id": f"doc-{i}", "text": text, "topic": i % 5})
    return docs


JSONL = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in _documents()).encode("utf-8")
TEXT = EOT.join(f"\n{d['text']}\nThe end of part {i}.\n" for i, d in enumerate(_documents(300)))


def _config(kind: str = "jsonl", **spec: Any) -> dict[str, Any]:
    source = {"name": "src", "kind": kind, "path": "in", "license": "mit", **spec}
    if kind == "jsonl":
        source["id_field"] = "id"
    return {
        "dataset": "packed",
        "version": "v1",
        "tokenizer": {"id": "bytes"},
        "sources": [source],
        "shards": {"target_mb": 0.05},
    }


def _variant(
    base: Path, write_config: WriteConfig, name: str, data: bytes, **config: Any
) -> tuple[Path, Path]:
    """`base/<name-folder>/{config.json, in/<name>}` and a fresh data root beside them."""
    folder = base / re.sub(r"[^a-z0-9]+", "-", name.lower())
    (folder / "in").mkdir(parents=True)
    (folder / "in" / name).write_bytes(data)
    return write_config(folder / "config.json", _config(**config)), folder / "root"


def _run(corpus: CorpusRunner, stage: str, cfg: Path, root: Path) -> dict[str, Any]:
    done = corpus("run", "--stage", stage, "--config", cfg, "--root", root)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)


def _raw(root: Path) -> list[tuple[str, str, str]]:
    """(id, text, meta) of every raw document, in order."""
    (folder,) = [p for p in (root / "raw").iterdir() if not p.name.startswith((".", "LEDGER"))]
    parts = sorted(folder.glob("part-*.parquet"))
    assert parts
    return [(r["id"], r["text"], r["meta"]) for p in parts for r in pq.read_table(p).to_pylist()]


def _shards(root: Path) -> dict[str, bytes]:
    """Every file of the published shards, by name."""
    (manifest,) = (root / "corpus").rglob("_MANIFEST.json")
    return {p.name: p.read_bytes() for p in sorted(manifest.parent.iterdir()) if p.is_file()}


def _source_record(root: Path) -> dict[str, Any]:
    (record,) = (root / "raw").glob("*/_SOURCE.json")
    return dict(json.loads(record.read_text("utf-8")))


@pytest.fixture(scope="module")
def plain(
    tmp_path_factory: pytest.TempPathFactory, corpus: CorpusRunner, write_config: WriteConfig
) -> dict[str, Any]:
    """The uncompressed JSONL source, fetched and sharded: what every variant must equal."""
    base = tmp_path_factory.mktemp("plain")
    cfg, root = _variant(base, write_config, "docs.jsonl", JSONL)
    _run(corpus, "fetch", cfg, root)
    _run(corpus, "shard", cfg, root)
    return {"raw": _raw(root), "shards": _shards(root)}


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_each_compression_gives_the_plain_files_documents_and_shards(
    tmp_path: Path,
    corpus: CorpusRunner,
    write_config: WriteConfig,
    plain: dict[str, Any],
    suffix: str,
) -> None:
    packed = COMPRESS[suffix](JSONL)
    assert len(packed) < len(JSONL) // 2
    cfg, root = _variant(tmp_path, write_config, f"docs.jsonl{suffix}", packed)
    fetched = _run(corpus, "fetch", cfg, root)
    assert fetched["documents"] == len(_documents())
    assert _raw(root) == plain["raw"]
    _run(corpus, "shard", cfg, root)
    assert _shards(root) == plain["shards"]
    # the pin and the input list are of the file as it is on disk: its compressed bytes
    record = _source_record(root)
    digest = hashlib.sha256(packed).hexdigest()
    assert record["input_sha256"] == digest
    assert record["inputs"] == [
        {"name": f"docs.jsonl{suffix}", "sha256": digest, "bytes": len(packed)}
    ]


def test_a_pin_is_the_compressed_files_sha256(
    tmp_path: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    packed = gzip.compress(JSONL)
    pinned, root = _variant(
        tmp_path, write_config, "docs.jsonl.gz", packed, sha256=hashlib.sha256(packed).hexdigest()
    )
    _run(corpus, "fetch", pinned, root)
    wrong, root = _variant(
        tmp_path / "wrong",
        write_config,
        "docs.jsonl.gz",
        packed,
        sha256=hashlib.sha256(JSONL).hexdigest(),
    )
    done = corpus("run", "--stage", "fetch", "--config", wrong, "--root", root)
    assert done.returncode == 65, done.stderr


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("docs.jsonl", gzip.compress(JSONL)),  # a .jsonl that really is gzip
        ("docs.jsonl", zstandard.ZstdCompressor().compress(JSONL)),  # ... or zstd
        ("docs.jsonl.gz", JSONL),  # a .gz that is plain
        ("docs.jsonl.zst", bz2.compress(JSONL)),  # a .zst that is bzip2
    ],
    ids=["jsonl-is-gzip", "jsonl-is-zstd", "gz-is-plain", "zst-is-bzip2"],
)
def test_the_first_bytes_decide_not_the_extension(
    tmp_path: Path,
    corpus: CorpusRunner,
    write_config: WriteConfig,
    plain: dict[str, Any],
    name: str,
    data: bytes,
) -> None:
    cfg, root = _variant(tmp_path, write_config, name, data)
    _run(corpus, "fetch", cfg, root)
    assert _raw(root) == plain["raw"]


def test_a_multi_member_gzip_is_read_to_its_end(
    tmp_path: Path, corpus: CorpusRunner, write_config: WriteConfig, plain: dict[str, Any]
) -> None:
    lines = JSONL.splitlines(keepends=True)
    thirds = [b"".join(lines[:100]), b"".join(lines[100:101]), b"".join(lines[101:])]
    members = b"".join(gzip.compress(part) for part in thirds)  # as `cat a.gz b.gz c.gz` makes
    cfg, root = _variant(tmp_path, write_config, "docs.jsonl.gz", members)
    _run(corpus, "fetch", cfg, root)
    assert _raw(root) == plain["raw"]


@pytest.mark.parametrize("suffix", [".xz", ".zst"])
def test_a_compressed_text_source_splits_on_its_separator(
    tmp_path: Path, corpus: CorpusRunner, write_config: WriteConfig, suffix: str
) -> None:
    data = TEXT.encode("utf-8")
    texts = []
    for name, blob in [("plain.txt", data), (f"packed.txt{suffix}", COMPRESS[suffix](data))]:
        cfg, root = _variant(
            tmp_path / name, write_config, "stories.txt", blob, kind="text", separator=EOT
        )
        _run(corpus, "fetch", cfg, root)
        texts.append(_raw(root))
    expected = [part.strip() for part in TEXT.split(EOT)]
    assert [text for _id, text, _meta in texts[0]] == expected
    assert texts[1] == texts[0]


def _fails_fast(corpus: CorpusRunner, cfg: Path, root: Path) -> subprocess.CompletedProcess[str]:
    start = time.monotonic()
    done = corpus("run", "--stage", "fetch", "--config", cfg, "--root", root, timeout=60)
    assert time.monotonic() - start < 10, "a broken stream must fail at once, not hang"
    assert done.returncode == 65, done.stderr
    assert "Traceback" not in done.stderr
    assert not [p for p in (root / "raw").iterdir() if not p.name.startswith(".")]
    return done


def test_a_truncated_gzip_is_bad_data_naming_the_file_and_where_it_ends(
    tmp_path: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    packed = gzip.compress(JSONL)
    cut = packed[: len(packed) * 2 // 3]
    cfg, root = _variant(tmp_path, write_config, "docs.jsonl.gz", cut)
    done = _fails_fast(corpus, cfg, root)
    assert "docs.jsonl.gz" in done.stderr
    assert f"truncated gzip data: the file ends at compressed byte {len(cut):,}" in done.stderr


def test_a_corrupt_zstd_is_bad_data_naming_the_file_and_the_offset(
    tmp_path: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    packed = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(JSONL * 20))
    middle = len(packed) // 2
    packed[middle : middle + 32] = bytes(b ^ 0x5A for b in packed[middle : middle + 32])
    cfg, root = _variant(tmp_path, write_config, "docs.jsonl.zst", bytes(packed))
    done = _fails_fast(corpus, cfg, root)
    found = re.search(
        r"docs\.jsonl\.zst: corrupt zstd data: decoding stopped at compressed byte "
        r"([\d,]+)",
        done.stderr,
    )
    assert found, done.stderr
    offset = int(found.group(1).replace(",", ""))
    assert middle < offset <= len(packed)


def test_a_bad_line_in_a_compressed_file_names_its_line(
    tmp_path: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    lines = JSONL.splitlines(keepends=True)
    broken = b"".join(lines[:250]) + b'{"id": "x", "text": "unterminated\n' + b"".join(lines[250:])
    cfg, root = _variant(tmp_path, write_config, "docs.jsonl.bz2", bz2.compress(broken))
    done = _fails_fast(corpus, cfg, root)
    assert "docs.jsonl.bz2:251: malformed JSON line" in done.stderr


def test_a_gzip_with_a_broken_header_is_not_taken_for_plain_text(
    tmp_path: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    packed = bytearray(gzip.compress(JSONL))
    packed[:2] = b"\x00\x00"  # the magic is gone; the rest is still binary
    cfg, root = _variant(tmp_path, write_config, "docs.jsonl.gz", bytes(packed))
    done = _fails_fast(corpus, cfg, root)
    assert "docs.jsonl.gz: corrupt gzip data: no gzip header at compressed byte 0" in done.stderr
