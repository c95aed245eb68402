"""The corpus side of `corpus export-hf` in-process: column mapping and what is refused."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_assets.core.errors import EXIT_DATA, DataError
from corpus_assets.core.stages.export_hf import export_corpus, shards_manifest_of


def build(folder: Path, table: pa.Table) -> Path:
    """A one-shard build of `table` that `corpus verify` accepts; its manifest."""
    folder.mkdir()
    shard = folder / "shard-00000.parquet"
    pq.write_table(table, shard)
    entry = {
        "name": shard.name,
        "sha256": hashlib.sha256(shard.read_bytes()).hexdigest(),
        "bytes": shard.stat().st_size,
        "rows": table.num_rows,
    }
    manifest = {
        "kind": "shards",
        "build_id": "corpus/t/v1/000000000000",
        "documents_in": table.num_rows,
        "documents_out": table.num_rows,
        "text_bytes_out": 0,
        "dropped": {},
        "duplicates": {},
        "pii": {},
        "shards": [entry],
    }
    (folder / "_MANIFEST.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder / "_MANIFEST.json"


ROWS = {"id": ["a", "b"], "text": ["one", "two"], "source": ["s", "s"], "license": ["mit", "x"]}


@pytest.fixture(autouse=True)
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))


def test_a_shard_without_a_column_is_refused_naming_it(tmp_path: Path) -> None:
    rows = {k: v for k, v in ROWS.items() if k != "license"}
    manifest = build(tmp_path / "b", pa.table(rows))
    with pytest.raises(DataError, match=r"shard-00000.parquet: no column license") as exc:
        export_corpus(manifest, tmp_path / "out" / "hf")
    assert exc.value.exit_code == EXIT_DATA
    assert list((tmp_path / "out").iterdir()) == []  # the staging folder is gone


def test_a_column_that_is_not_text_is_refused_naming_the_shard(tmp_path: Path) -> None:
    rows = {**ROWS, "text": [["one"], ["two"]]}
    manifest = build(tmp_path / "b", pa.table(rows))
    with pytest.raises(DataError, match=r"shard-00000.parquet: columns \(.*text: list"):
        export_corpus(manifest, tmp_path / "out" / "hf")
    assert list((tmp_path / "out").iterdir()) == []


def test_columns_are_mapped_by_name_and_type(tmp_path: Path) -> None:
    import datasets

    shuffled = {k: ROWS[k] for k in ("license", "text", "id", "source")}
    table = pa.table(shuffled).cast(pa.schema([(k, pa.large_string()) for k in shuffled]))
    table = table.append_column("extra", pa.array([1, 2]))
    done = export_corpus(build(tmp_path / "b", table), tmp_path / "hf")
    assert (done.rows, done.licenses) == (2, {"mit": 1, "x": 1})
    loaded = datasets.load_from_disk(str(tmp_path / "hf"))
    assert loaded.column_names == ["id", "text", "source", "license"]
    assert loaded[1] == {"id": "b", "text": "two", "source": "s", "license": "x"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "hf"]


def test_only_a_shards_manifest_is_one(tmp_path: Path) -> None:
    manifest = build(tmp_path / "b", pa.table(ROWS))
    assert shards_manifest_of(manifest) == manifest
    assert shards_manifest_of(manifest.parent) == manifest
    doc = json.loads(manifest.read_text(encoding="utf-8"))
    manifest.write_text(json.dumps({**doc, "kind": "tokens"}), encoding="utf-8")
    assert shards_manifest_of(manifest.parent) is None
    assert shards_manifest_of(tmp_path) is None


def test_a_corrupt_manifest_is_bad_data_naming_it(tmp_path: Path) -> None:
    manifest = build(tmp_path / "b", pa.table(ROWS))
    manifest.write_text("{not json", encoding="utf-8")
    with pytest.raises(DataError, match=r"_MANIFEST.json: corrupt manifest: not valid JSON"):
        shards_manifest_of(manifest.parent)
