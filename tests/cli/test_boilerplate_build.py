"""`[filters] boilerplate_max_documents`: a shard build removes lines held by too many
documents, drops a document left too short with the filters' reason, and counts both."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from support.corpus import run_corpus

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
HEAD = 'dataset = "t"\nversion = "v1"\ntokenizer = {id = "bytes"}\n'
SOURCE = (
    '[[sources]]\nname = "docs"\nkind = "jsonl"\npath = "in.jsonl"\nlicense = "mit"\n'
    "[licenses]\nallow = ['mit']\n[shards]\ntarget_mb = 1.0\n"
)
FOOTER = "You received this message because you are subscribed to the Readers group."
BODIES = [
    "The river ran past the old mill, and the miller's daughter watched it from her window.",
    "At the edge of the harbour stood a lighthouse that no one had climbed for twenty years.",
    "Every morning she counted the boats that carried grain to the town below the green hills.",
]


def build(tmp_path: Path, filters: str) -> tuple[dict[str, Any], list[str]]:
    docs = [f"{body}\n{FOOTER}" for body in BODIES] + [f"Thanks!\n{FOOTER}"]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in docs))
    cfg = tmp_path / "c.toml"
    cfg.write_text(HEAD + SOURCE + filters, encoding="utf-8")
    root = tmp_path / "root"
    run_corpus("run", "--stage", "fetch", "--config", cfg, "--root", root, environ=ENV, check=True)
    out = run_corpus(
        "run", "--stage", "shard", "--config", cfg, "--root", root, environ=ENV, check=True
    )
    path = root / json.loads(out.stdout)["manifest"]
    manifest = json.loads(path.read_text())
    texts = pq.read_table(path.parent / manifest["shards"][0]["name"]).column("text").to_pylist()
    return manifest, texts


def test_a_footer_in_four_documents_goes_from_all_of_them(tmp_path: Path) -> None:
    manifest, texts = build(tmp_path, "[filters]\nboilerplate_max_documents = 3\n")
    assert texts == BODIES
    assert manifest["dropped"] == {"too_few_chars": 1}  # "Thanks!" alone
    assert manifest["boilerplate"] == {
        "max_documents": 3,
        "min_words": 3,
        "lines": 1,
        "lines_removed": 4,
        "documents": 4,
    }


def test_held_by_no_more_than_n_documents_the_line_stays(tmp_path: Path) -> None:
    manifest, texts = build(tmp_path, "[filters]\nboilerplate_max_documents = 4\n")
    assert texts == [f"{body}\n{FOOTER}" for body in BODIES] + [f"Thanks!\n{FOOTER}"]
    assert manifest["boilerplate"]["lines"] == 0 and manifest["dropped"] == {}


def test_off_by_default_nothing_is_counted(tmp_path: Path) -> None:
    manifest, texts = build(tmp_path, "")
    assert "boilerplate" not in manifest and len(texts) == 4
