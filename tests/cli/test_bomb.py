"""Decompression bombs: a 200 MB line inside a few KB of zstd (and the same line gzipped or
plain) fetched by `corpus run --stage fetch` in a subprocess. The line is over the source's
`max_document_bytes`, so the fetch reads past it in pieces: exit 0, the other documents kept, the
line counted and named, and the fetch's peak RSS grows by at most the limit plus SLACK_MB over a
fetch of the small documents alone: under half the line's size.

The peak is taken by a small launcher process (RUSAGE_CHILDREN after the fetch ends): Linux
counts the pages of whatever process forks a child into the child's peak, and this test process
may be large.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pyarrow.parquet as pq
import pytest
import zstandard
from support.corpus import corpus_argv

WriteConfig = Callable[[Path, Mapping[str, Any]], Path]

LINE_MB = 200
SLACK_MB = 32  # decoder state, read buffers, allocator rounding
DEFAULT_LIMIT = 64 * 1024 * 1024
MEASURE = """
import resource, subprocess, sys
code = subprocess.run(sys.argv[2:]).returncode
with open(sys.argv[1], "w") as out:
    out.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code)
"""
SMALL = [{"id": f"doc-{i}", "text": f"A small document, number {i}."} for i in range(6)]


def _lines(big: bool) -> Iterator[bytes]:
    """Three small documents, the 200 MB line (when `big`) a MiB at a time, three more."""
    for doc in SMALL[:3]:
        yield (json.dumps(doc) + "\n").encode()
    if big:
        yield b'{"id": "bomb", "text": "'
        block = b"ha" * (1 << 19)
        for _ in range(LINE_MB):
            yield block
        yield b'"}\n'
    for doc in SMALL[3:]:
        yield (json.dumps(doc) + "\n").encode()


def _write(path: Path, big: bool) -> Path:
    """The documents as `path`, compressed by its suffix (.zst, .gz) or plain, streamed."""
    with open(path, "wb") as raw:
        out: IO[bytes]
        if path.suffix == ".zst":
            out = zstandard.ZstdCompressor(level=19).stream_writer(raw, closefd=False)
        elif path.suffix == ".gz":
            out = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9)
        else:
            out = raw
        for piece in _lines(big):
            out.write(piece)
        if out is not raw:
            out.close()
    return path


@dataclass
class Fetch:
    code: int
    result: dict[str, Any]
    stderr: str
    peak_mb: float
    root: Path

    def record(self) -> dict[str, Any]:
        (path,) = (self.root / "raw").glob("*/_SOURCE.json")
        return dict(json.loads(path.read_text("utf-8")))

    def ids(self) -> list[str]:
        parts = sorted((self.root / "raw").glob("*/part-*.parquet"))
        return [row["id"] for p in parts for row in pq.read_table(p).to_pylist()]


def _fetch(folder: Path, write_config: WriteConfig, **source: Any) -> Fetch:
    """`corpus run --stage fetch` of the jsonl source `folder/in`, with its peak RSS."""
    spec = {"name": "src", "kind": "jsonl", "path": "in", "license": "mit", "id_field": "id"}
    config = {"dataset": "bomb", "version": "v1", "tokenizer": {"id": "bytes"}}
    cfg = write_config(folder / "config.json", {**config, "sources": [{**spec, **source}]})
    root = folder / "root"
    argv = corpus_argv("run", "--stage", "fetch", "--config", cfg, "--root", root)
    peak = folder / "peak-kb"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with open(folder / "out", "wb") as out, open(folder / "err", "wb") as err:
        measured = [sys.executable, "-c", MEASURE, str(peak), *argv]
        code = subprocess.run(measured, stdout=out, stderr=err, env=env, check=False).returncode
    stdout = (folder / "out").read_text("utf-8")
    result = json.loads(stdout) if code == 0 else {}
    stderr = (folder / "err").read_text("utf-8")
    return Fetch(code, result, stderr, int(peak.read_text()) / 1024, root)


@pytest.fixture(scope="module")
def baseline_mb(tmp_path_factory: pytest.TempPathFactory, write_config: WriteConfig) -> float:
    """The peak RSS of fetching the small documents alone."""
    folder = tmp_path_factory.mktemp("small")
    (folder / "in").mkdir()
    _write(folder / "in" / "docs.jsonl", big=False)
    done = _fetch(folder, write_config)
    assert done.code == 0, done.stderr
    return done.peak_mb


def _bomb(tmp_path: Path, name: str) -> Path:
    (tmp_path / "in").mkdir()
    return _write(tmp_path / "in" / name, big=True)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["docs.jsonl.zst", "docs.jsonl.gz", "docs.jsonl"])
def test_a_200_mb_line_is_skipped_counted_and_named_in_bounded_memory(
    tmp_path: Path, write_config: WriteConfig, baseline_mb: float, name: str
) -> None:
    path = _bomb(tmp_path, name)
    if name.endswith(".zst"):
        assert path.stat().st_size < 20_000, "a bomb: a few KB that expand to 200 MB"
    done = _fetch(tmp_path, write_config)
    assert done.code == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.ids() == [d["id"] for d in SMALL]
    [source] = done.result["sources"]
    assert source["documents"] == len(SMALL) and source["too_large"] == 1
    assert done.record()["dropped"] == {"too_large": 1}
    notes = [line for line in done.stderr.splitlines() if "max_document_bytes" in line]
    assert notes == [
        f"fetch: source src: skipped 1 document over max_document_bytes ({DEFAULT_LIMIT:,} "
        f"bytes); the first at {path}:4"
    ]
    growth_bound = DEFAULT_LIMIT / 2**20 + SLACK_MB
    assert growth_bound < LINE_MB / 2  # a bound that holding the line whole would break
    assert done.peak_mb - baseline_mb < growth_bound, (done.peak_mb, baseline_mb)

    again = _fetch(tmp_path, write_config)  # from the raw cache: the same count
    assert again.code == 0 and again.result["sources"][0]["cached"] is True
    assert again.result["sources"][0]["too_large"] == 1


@pytest.mark.timeout(120)
def test_a_limit_in_the_config_is_honoured_and_bounds_memory(
    tmp_path: Path, write_config: WriteConfig, baseline_mb: float
) -> None:
    _bomb(tmp_path, "docs.jsonl.zst")
    done = _fetch(tmp_path, write_config, max_document_bytes=1 << 20)
    assert done.code == 0, done.stderr
    assert done.result["sources"][0]["too_large"] == 1
    assert "over max_document_bytes (1,048,576 bytes)" in done.stderr
    assert done.peak_mb < baseline_mb + 1 + SLACK_MB, (done.peak_mb, baseline_mb)


@pytest.mark.timeout(60)
def test_the_limit_counts_each_line_s_bytes_and_names_the_first_one_over(
    tmp_path: Path, write_config: WriteConfig
) -> None:
    lines = [json.dumps({"id": f"d{i}", "text": "x" * n}) for i, n in enumerate([5, 60, 6, 61])]
    limit = len(lines[1])  # d1 is exactly at the limit: kept; d3 is one byte over
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "docs.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = _fetch(tmp_path, write_config, max_document_bytes=limit)
    assert done.code == 0, done.stderr
    assert done.ids() == ["d0", "d1", "d2"]
    assert done.record()["dropped"] == {"too_large": 1}
    assert f"the first at {tmp_path / 'in' / 'docs.jsonl'}:4" in done.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize("value", [0, -1, 2**30 + 1, "64MB", 1.5, True])
def test_a_bad_limit_is_exit_64_in_one_line_naming_the_range(
    tmp_path: Path, write_config: WriteConfig, value: Any
) -> None:
    (tmp_path / "in").mkdir()
    _write(tmp_path / "in" / "docs.jsonl", big=False)
    done = _fetch(tmp_path, write_config, max_document_bytes=value)
    assert done.code == 64, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "max_document_bytes" in line
    assert line.endswith("allowed: an integer from 1 to 1,073,741,824 (1 GiB)"), line
    assert not (tmp_path / "root" / "raw").exists()
