"""`corpus export-hf PATH DEST`: a real corpus build and a real task snapshot, through the CLI.

Every export runs with HF_HOME pointing at a folder of the test that must stay absent: the
export writes nothing outside DEST (no `datasets` cache, no home folder).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from support.corpus import run_corpus

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "examples" / "tiny.toml"
ARITHMETIC = REPO / "examples" / "tasks" / "arithmetic.yaml"


def hf_env(tmp: Path) -> dict[str, str]:
    return {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp / "hf-home")}


def export(tmp: Path, path: Path, dest: Path) -> subprocess.CompletedProcess[str]:
    return run_corpus("export-hf", path, dest, env=hf_env(tmp))


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shards folder of `examples/tiny.toml` (fetch + shard stages, no Dagster)."""
    root = tmp_path_factory.mktemp("root")
    for stage in ("fetch", "shard"):
        proc = run_corpus("run", "--stage", stage, "--config", TINY, "--root", root)
        assert proc.returncode == 0, proc.stderr
    (manifest,) = root.glob("corpus/*/*/*/_MANIFEST.json")
    return manifest.parent


def manifest_of(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "_MANIFEST.json").read_text(encoding="utf-8"))


def shard_rows(folder: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for shard in manifest_of(folder)["shards"]:
        rows += pq.read_table(folder / shard["name"]).to_pylist()
    return rows


def test_a_corpus_build_exports_and_loads_back(build: Path, tmp_path: Path) -> None:
    import datasets

    dest = tmp_path / "out" / "tiny-hf"
    proc = export(tmp_path, build / "_MANIFEST.json", dest)
    assert proc.returncode == 0, proc.stderr
    line = json.loads(proc.stdout)
    manifest = manifest_of(build)
    assert line == {
        "kind": "corpus_build",
        "source": str(build / "_MANIFEST.json"),
        "dest": str(dest),
        "rows": manifest["documents_out"],
        "build_id": manifest["build_id"],
    }
    loaded = datasets.load_from_disk(str(dest))
    assert len(loaded) == manifest["documents_out"] == 300
    assert loaded.column_names == ["id", "text", "source", "license"]
    rows = shard_rows(build)
    assert loaded[0] == rows[0]
    assert loaded[len(rows) - 1]["text"] == rows[-1]["text"]
    assert loaded["id"] == [r["id"] for r in rows]
    card = (dest / "README.md").read_text(encoding="utf-8")
    assert manifest["build_id"] in card
    assert "| cc0-1.0 | 300 |" in card
    assert f"- shards: {len(manifest['shards'])}" in card
    assert '"target_mb": 0.05' in card  # the config, as the manifest records it
    source = json.loads((dest / "corpus_source.json").read_text(encoding="utf-8"))
    assert source["build_id"] == manifest["build_id"]
    assert source["config_sha256"] == manifest["config_sha256"]
    assert source["partition_key"] == manifest["partition_key"]
    assert source["rows"] == 300
    assert sorted(p.name for p in dest.parent.iterdir()) == ["tiny-hf"]  # no staging left
    assert not (tmp_path / "hf-home").exists()


def test_the_folder_of_a_build_is_accepted_too(build: Path, tmp_path: Path) -> None:
    proc = export(tmp_path, build, tmp_path / "hf")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["rows"] == 300


def test_a_tampered_shard_is_refused_and_nothing_is_written(build: Path, tmp_path: Path) -> None:
    copy = tmp_path / "build"
    shutil.copytree(build, copy)  # a build is relocatable: the copy verifies as the original
    shard = copy / manifest_of(copy)["shards"][1]["name"]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    dest = tmp_path / "out" / "hf"
    proc = export(tmp_path, copy, dest)
    assert proc.returncode == 65, proc.stderr
    assert str(shard) in proc.stderr
    assert proc.stdout == ""
    assert not dest.parent.exists() or list(dest.parent.iterdir()) == []


def test_an_existing_dest_is_refused_before_any_work(build: Path, tmp_path: Path) -> None:
    dest = tmp_path / "hf"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine", encoding="utf-8")
    proc = export(tmp_path, build, dest)
    assert proc.returncode == 64
    assert f"{dest} already exists" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]
    assert (dest / "keep.txt").read_text(encoding="utf-8") == "mine"
    # refused before reading PATH at all: even a PATH that does not exist gets the DEST error
    proc = export(tmp_path, tmp_path / "nothing-here", dest)
    assert proc.returncode == 64 and f"{dest} already exists" in proc.stderr


def test_neither_kind_is_refused_naming_both(build: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.json").write_text("{}", encoding="utf-8")
    proc = export(tmp_path, other, tmp_path / "hf")
    assert proc.returncode == 64
    assert "shards manifest" in proc.stderr and "task snapshot" in proc.stderr
    assert not (tmp_path / "hf").exists()


def test_a_task_snapshot_exports_through_the_same_command(tmp_path: Path) -> None:
    import datasets

    job = tmp_path / "job"
    proc = run_corpus("tasks", "--config", ARITHMETIC, "--output", job, env=hf_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    dataset_id = json.loads(proc.stdout)["dataset_id"]
    dest = tmp_path / "job-hf"
    proc = export(tmp_path, job / "dataset", dest)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "kind": "task_snapshot",
        "source": str(job / "dataset"),
        "dest": str(dest),
        "rows": 64,
        "dataset_id": dataset_id,
    }
    loaded = datasets.load_from_disk(str(dest))
    assert len(loaded) == 64
    train = [
        json.loads(line) for line in (job / "dataset" / "train.jsonl").read_text().splitlines()
    ]
    assert loaded[0] == train[0]
    source = json.loads((dest / "corpus_source.json").read_text(encoding="utf-8"))
    assert source["dataset_id"] == dataset_id
    assert not (tmp_path / "hf-home").exists()


def test_memory_stays_far_below_the_corpus_size(tmp_path: Path) -> None:
    """Peak Python (tracemalloc) and Arrow (memory pool) memory of exports of 16 and 49 MB corpora.

    Both peaks stay far below the corpus text and do not grow with it (the export streams
    batch by batch). The same meter then reads the shards whole, to show it would see a
    non-streaming export.
    """
    small, big = measure(tmp_path / "small", shards=2), measure(tmp_path / "big", shards=6)
    text_bytes = 6 * 4096 * 2000
    assert big["rows"] == 6 * 4096
    assert big["python_peak"] < text_bytes / 10, big
    assert big["arrow_peak"] < text_bytes / 4, big
    assert big["arrow_peak"] < small["arrow_peak"] + 1_000_000, (small, big)
    assert big["python_peak"] < small["python_peak"] + 1_000_000, (small, big)
    assert big["arrow_peak_whole_read"] > text_bytes, big  # the meter sees a whole read


def measure(tmp: Path, shards: int) -> dict[str, int]:
    """Export a generated build of `shards` shards (4096 rows of 2000 bytes each); the peaks."""
    write_big_build(tmp / "build", shards=shards, rows_per_shard=4096, row_chars=2000)
    script = tmp / "measure.py"
    script.write_text(MEASURE, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp / "build" / "_MANIFEST.json"), str(tmp / "hf")],
        capture_output=True,
        text=True,
        env={**os.environ, **hf_env(tmp), "PYTHONPATH": str(REPO)},
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert not (tmp / "hf-home").exists()
    peaks: dict[str, int] = json.loads(proc.stdout)
    return peaks


MEASURE = """
import json, sys, tracemalloc
from pathlib import Path
import datasets, pyarrow as pa, pyarrow.parquet as pq
from corpus_assets.core.stages.export_hf import export_corpus
tracemalloc.start()
done = export_corpus(Path(sys.argv[1]), Path(sys.argv[2]))
python_peak = tracemalloc.get_traced_memory()[1]
arrow_peak = pa.default_memory_pool().max_memory()
tables = [pq.read_table(p) for p in sorted(Path(sys.argv[1]).parent.glob("*.parquet"))]
print(json.dumps({"rows": done.rows, "python_peak": python_peak, "arrow_peak": arrow_peak,
                  "arrow_peak_whole_read": pa.default_memory_pool().max_memory()}))
"""


def write_big_build(folder: Path, shards: int, rows_per_shard: int, row_chars: int) -> int:
    """A shards build that `corpus verify` accepts, written batch by batch; its text bytes."""
    import hashlib

    import pyarrow as pa

    from corpus_assets.core.stages.shard_writer import SHARD_SCHEMA

    folder.mkdir(parents=True)
    entries = []
    for s in range(shards):
        path = folder / f"shard-{s:05d}.parquet"
        with pq.ParquetWriter(path, SHARD_SCHEMA, compression="zstd") as writer:
            for start in range(0, rows_per_shard, 1024):
                ids = [f"big-{s}-{i}" for i in range(start, start + 1024)]
                texts = [(f"{i} " + "word " * row_chars)[:row_chars] for i in ids]
                batch = {"id": ids, "text": texts, "source": ["big"] * 1024}
                batch["license"] = ["cc0-1.0" if s % 2 else "mit"] * 1024
                writer.write_table(pa.table(batch, schema=SHARD_SCHEMA))
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        entries.append(
            {
                "name": path.name,
                "sha256": digest,
                "bytes": path.stat().st_size,
                "rows": rows_per_shard,
            }
        )
    rows = shards * rows_per_shard
    manifest = {
        "kind": "shards",
        "build_id": "corpus/big/v1/000000000000",
        "partition_key": "big-v1-000000000000",
        "config_sha256": "0" * 64,
        "config": {"dataset": "big", "version": "v1", "tokenizer": {"id": "bytes"}},
        "documents_in": rows,
        "documents_out": rows,
        "text_bytes_out": rows * row_chars,
        "dropped": {},
        "duplicates": {},
        "pii": {},
        "shards": entries,
    }
    (folder / "_MANIFEST.json").write_text(json.dumps(manifest), encoding="utf-8")
    return rows * row_chars
