"""`[filters] languages`: a shard build drops other languages with reason `language`, writes each
document's language and score as columns, and counts the languages in its manifest."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from support.corpus import run_corpus

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
HEAD = 'dataset = "t"\nversion = "v1"\ntokenizer = {id = "bytes"}\n'
SOURCE = (
    '[[sources]]\nname = "docs"\nkind = "jsonl"\npath = "in.jsonl"\nlicense = "mit"\n'
    "[licenses]\nallow = ['mit']\n"
)
DOCS = [
    "The river ran past the old mill, and the miller's daughter watched it from her window. "
    "Every morning she counted the boats that carried grain to the town below the hills.",
    "La rivière passait devant le vieux moulin, et la fille du meunier la regardait depuis "
    "sa fenêtre. Chaque matin, elle comptait les bateaux qui portaient le grain vers la ville.",
    "At the edge of the harbour stood a lighthouse that no one had climbed for twenty years. "
    "The keeper had left with his family when the new beacon was placed on the northern cliff.",
    "Der Fluss floss an der alten Mühle vorbei, und die Tochter des Müllers sah ihm von ihrem "
    "Fenster aus zu. Jeden Morgen zählte sie die Boote, die Getreide in die Stadt brachten.",
]


def corpus(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run_corpus(*args, environ=ENV, check=check)


def build(tmp_path: Path, filters: str) -> tuple[dict[str, Any], Path]:
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in DOCS))
    cfg = tmp_path / "c.toml"
    cfg.write_text(HEAD + SOURCE + filters, encoding="utf-8")
    root = tmp_path / "root"
    corpus("run", "--stage", "fetch", "--config", str(cfg), "--root", str(root))
    out = json.loads(
        corpus("run", "--stage", "shard", "--config", str(cfg), "--root", str(root)).stdout
    )
    manifest_path = root / str(out["manifest"])
    return json.loads(manifest_path.read_text()), manifest_path.parent


def test_an_english_build_drops_the_others_and_records_each_language(tmp_path: Path) -> None:
    manifest, folder = build(tmp_path, '[filters]\nlanguages = ["en", "fr"]\n')
    assert (manifest["documents_in"], manifest["documents_out"]) == (4, 3)
    assert manifest["dropped"] == {"language": 1}
    language = manifest["language"]
    assert language["documents"] == {"en": 2, "fr": 1}
    assert (language["model"], language["languages"], language["min_score"]) == (
        "lid.176.ftz",
        ["en", "fr"],
        0.65,
    )
    assert manifest["config"]["filters"]["language_model_sha256"] == language["model_sha256"]
    table = pq.read_table(folder / manifest["shards"][0]["name"])
    assert table.column_names == ["id", "text", "source", "license", "language", "language_score"]
    assert table.column("language").to_pylist() == ["en", "fr", "en"]
    assert min(table.column("language_score").to_pylist()) > 0.65
    assert corpus("verify", str(folder / "_MANIFEST.json")).returncode == 0
    corpus("report", str(folder))
    assert json.loads((folder / "report.json").read_text())["languages"] == {"en": 2, "fr": 1}
    assert (
        "| language | count |\n|---|---:|\n| en | 2 |\n| fr | 1 |"
        in (folder / "REPORT.md").read_text()
    )
    assert "| language | 1 |" in (folder / "REPORT.md").read_text()  # the drop reason


def test_without_languages_the_shards_have_no_language_column(tmp_path: Path) -> None:
    manifest, folder = build(tmp_path, "")
    assert manifest["documents_out"] == 4 and "language" not in manifest
    table = pq.read_table(folder / manifest["shards"][0]["name"])
    assert table.column_names == ["id", "text", "source", "license"]


def test_a_language_the_model_does_not_know_is_exit_64(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text(json.dumps({"text": DOCS[0]}) + "\n")
    cfg = tmp_path / "c.toml"
    cfg.write_text(HEAD + SOURCE + '[filters]\nlanguages = ["xx"]\n', encoding="utf-8")
    root = str(tmp_path / "root")
    corpus("run", "--stage", "fetch", "--config", str(cfg), "--root", root)
    out = corpus("run", "--stage", "shard", "--config", str(cfg), "--root", root, check=False)
    assert out.returncode == 64, out.stderr
    assert "languages: xx not known to the model; allowed: af, als, am" in out.stderr


def test_corpus_hash_shows_the_model_pin(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(HEAD + '[filters]\nlanguages = ["en"]\n', encoding="utf-8")
    out = corpus("hash", str(cfg)).stdout
    assert '"language_model_sha256":"' in out
