"""The shard stage's on-disk LSH index: grouping each band in many hash ranges, finding exact
copies a range of keys at a time and walking the rows in windows publish the same bytes as
doing each whole (the 1 MB benchmark corpus, in process), and so does a shingle buffer small
enough to be emptied; a band split by range groups each range exactly as filtering the whole
band for it does; exact dedup by sorted key words finds what numpy.unique found, also a hash
range of the keys at a time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from corpus_assets.core.config import DedupSpec
from corpus_assets.core.stages import shard_dedup, shard_lsh
from corpus_assets.core.stages.run import run_stage
from corpus_assets.core.stages.shard_dedup import exact_copies, exact_duplicates
from corpus_assets.core.stages.shard_tasks import TaskOutput, task_path
from corpus_assets.core.text import minhash
from corpus_assets.core.text.minhash import band_groups

REPO = Path(__file__).resolve().parents[2]


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*.parquet"))}


def test_hash_ranges_publish_the_same_shards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "corpus"
    make = [sys.executable, str(REPO / "bench" / "make_corpus.py"), "--out", str(data)]
    subprocess.run([*make, "--mb", "1"], check=True, capture_output=True)
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        'dataset = "t"\nversion = "v1"\ntokenizer = {id = "bytes"}\n'
        f'[[sources]]\nname = "b"\nkind = "jsonl"\npath = "{data}/part-*.jsonl"\n'
        'id_field = "id"\nlicense = "cc0-1.0"\n[shards]\ntarget_mb = 0.3\n',
        encoding="utf-8",
    )
    results = []
    for range_rows in (shard_lsh.RANGE_ROWS, 50):
        monkeypatch.setattr(shard_lsh, "RANGE_ROWS", range_rows)
        monkeypatch.setattr(shard_dedup, "EXACT_RANGE_ROWS", max(range_rows, 70))
        monkeypatch.setattr(minhash, "_WINDOW_ROWS", range_rows * 2)  # keep_first's windows
        monkeypatch.setattr(minhash, "_WINDOWS", 10**6)
        root = tmp_path / f"root-{range_rows}"
        run_stage("fetch", cfg, root)
        summary = run_stage("shard", cfg, root, workers=1)
        assert summary["duplicates"]["near"] > 0 and summary["partial_copies"] > 0
        results.append((summary["duplicates"], _tree(root / "corpus")))
    assert results[0] == results[1] and len(results[0][1]) > 1


def test_a_small_shingle_cache_publishes_the_same_shards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "corpus"
    make = [sys.executable, str(REPO / "bench" / "make_corpus.py"), "--out", str(data)]
    subprocess.run([*make, "--mb", "1"], check=True, capture_output=True)
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        'dataset = "t"\nversion = "v1"\ntokenizer = {id = "bytes"}\n'
        f'[[sources]]\nname = "b"\nkind = "jsonl"\npath = "{data}/part-*.jsonl"\n'
        'id_field = "id"\nlicense = "cc0-1.0"\n',
        encoding="utf-8",
    )
    pools: list[minhash._Pool] = []

    class CountedPool(minhash._Pool):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            pools.append(self)

    monkeypatch.setattr(minhash, "_Pool", CountedPool)
    results = []
    for block, cache_bytes in ((shard_lsh.SHINGLE_BLOCK, shard_lsh.SHINGLE_CACHE_BYTES), (3, 3000)):
        monkeypatch.setattr(shard_lsh, "SHINGLE_BLOCK", block)
        monkeypatch.setattr(shard_lsh, "SHINGLE_CACHE_BYTES", cache_bytes)
        root = tmp_path / f"root-{block}"
        run_stage("fetch", cfg, root)
        summary = run_stage("shard", cfg, root, workers=1)
        assert summary["duplicates"]["near"] > 0 and summary["partial_copies"] > 0
        results.append((summary["duplicates"], _tree(root / "corpus"), pools.pop().emptied))
    assert results[0][:2] == results[1][:2]
    assert results[0][2] == 0 and results[1][2] > 10  # emptied, by the small buffer


def test_exact_duplicates_as_numpy_unique_finds_them() -> None:
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 2**64 - 1, size=(5000, 2), dtype=np.uint64)
    keys[1::7] = keys[0:-1:7][: len(keys[1::7])]  # copies
    keys[3::11, 0] = keys[2::11, 0][: len(keys[3::11])]  # same high word, another low word
    keys[4::13, 1] = keys[5::13, 1][: len(keys[4::13])]  # same low word, another high word
    view = np.ascontiguousarray(keys).view(np.dtype((np.void, 16))).ravel()
    _, first = np.unique(view, return_index=True)
    expected = np.ones(len(keys), dtype=bool)
    expected[first] = False
    assert exact_duplicates(keys).tolist() == expected.tolist() and expected.sum() > 500
    assert exact_duplicates(keys[:0]).tolist() == []


@pytest.mark.parametrize(
    ("range_rows", "split_rows"), [(5000, 1 << 19), (700, 1 << 19), (700, 333)]
)
def test_a_band_split_by_range_groups_each_range_as_a_filter_of_the_whole_band(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, range_rows: int, split_rows: int
) -> None:
    monkeypatch.setattr(shard_lsh, "RANGE_ROWS", range_rows)
    monkeypatch.setattr(shard_lsh, "SPLIT_ROWS", split_rows)
    rng = np.random.default_rng(11)
    n, bands = 5000, 4
    keys = rng.integers(0, 1500, size=(bands, n), dtype=np.uint64) * np.uint64(2654435761)
    keys.astype("<u8").tofile(tmp_path / "bands.u64")
    index = shard_lsh.Index(tmp_path, n, DedupSpec(bands=bands, num_perm=128))
    for band in range(bands):
        paths = shard_lsh.group_band(index, band)
        assert len(paths) == index.ranges == -(-n // range_rows)
        for part, path in enumerate(paths):
            mine = np.flatnonzero(keys[band] % np.uint64(index.ranges) == part)
            expected = band_groups(keys[band][mine], mine.astype(np.int64))
            got = shard_lsh.load_groups(path)
            assert got.members.tolist() == expected.members.tolist()
            assert got.starts.tolist() == expected.starts.tolist() and len(got.starts) > 10
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("groups-")) == [
        "bands.u64"
    ]  # no split file left


@pytest.mark.parametrize(
    ("range_rows", "split_rows"), [(10**6, 1 << 19), (900, 1 << 19), (900, 1500)]
)
def test_exact_copies_by_hash_range_are_the_copies_of_the_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, range_rows: int, split_rows: int
) -> None:
    monkeypatch.setattr(shard_dedup, "EXACT_RANGE_ROWS", range_rows)
    monkeypatch.setattr(shard_dedup, "SPLIT_ROWS", split_rows)
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 2**64 - 1, size=(6000, 2), dtype=np.uint64)
    keys[1::5] = keys[rng.integers(0, 6000, size=len(keys[1::5]))]  # copies, earlier or later
    keys[2::9, 0] = keys[0:-2:9, 0][: len(keys[2::9])]  # same high word, another low word
    outputs, start = [], 0
    for index, size in enumerate([1000, 0, 1700, 1300, 2000]):  # tasks of uneven sizes
        np.save(task_path(tmp_path, index, ".keys.npy"), keys[start : start + size])
        outputs.append(TaskOutput(index, size, 0, size, {}))
        start += size
    expected = exact_duplicates(keys)
    assert exact_copies(tmp_path, outputs, len(keys)).tolist() == expected.tolist()
    assert expected.sum() > 500
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".keys.npy")) == []
