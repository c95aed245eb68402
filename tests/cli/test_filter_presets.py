"""`[filters] preset`: a shard build counts the reference rules' drops by reason in its manifest."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
from support.corpus import run_corpus

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
HEAD = 'dataset = "t"\nversion = "v1"\ntokenizer = {id = "bytes"}\n'
SOURCE = (
    '[[sources]]\nname = "docs"\nkind = "jsonl"\npath = "in.jsonl"\nlicense = "mit"\n'
    "[licenses]\nallow = ['mit']\n"
)
MILL = (
    "The river ran past the old mill, and the miller's daughter watched it from her window. "
    "Every morning she counted the boats that carried grain to the town below the hills. "
    "Her father said that the water had been higher in his youth, before the dam was built. "
    "She did not believe him, yet she wrote his stories down with care in a small blue book. "
    "Years later those pages became the only record of how the valley had looked."
)
LIGHTHOUSE = (
    "At the edge of the harbour stood a lighthouse that no one had climbed for twenty years. "
    "The keeper had left with his family when the new beacon was placed on the northern cliff. "
    "Children told each other that a ghost still wound the great clock at the top of the tower. "
    "One winter night a fisherman saw the lamp burning and rowed out to see who had lit it. "
    "He found only a cat asleep beside the warm glass, and he never told anyone what he saw."
)
DROPPED = {
    "too_few_words": "A tiny note about the cat and the dog that ran to the park on a sunny day.",
    "top_2gram": "buy now cheap deals " * 15,
    "bullet_lines": "\n".join(
        "- " + " ".join(LIGHTHOUSE.split()[i : i + 6]) for i in range(0, 90, 6)
    ),
    "too_few_stop_words": " ".join(
        f"{w}{i}" for i, w in enumerate(["alpha", "bravo", "charlie", "delta", "echo"] * 11)
    ),
    # every whitespace word holds a letter, half of the tokens (the commas) do not
    "non_alpha_tokens": " ".join(w.strip(".,") + "," for w in LIGHTHOUSE.split()),
}


def corpus(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run_corpus(*args, environ=ENV, check=check)


def test_a_gopher_build_counts_its_drops_per_reason(tmp_path: Path) -> None:
    docs = [MILL, *DROPPED.values(), LIGHTHOUSE]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in docs))
    cfg = tmp_path / "c.toml"
    cfg.write_text(HEAD + SOURCE + '[filters]\npreset = "gopher"\n', encoding="utf-8")
    root = str(tmp_path / "root")
    corpus("run", "--stage", "fetch", "--config", str(cfg), "--root", root)
    out = json.loads(corpus("run", "--stage", "shard", "--config", str(cfg), "--root", root).stdout)
    manifest = json.loads((tmp_path / "root" / str(out["manifest"])).read_text())
    assert (manifest["documents_in"], manifest["documents_out"]) == (len(docs), 2)
    assert manifest["dropped"] == dict(sorted(dict.fromkeys(DROPPED, 1).items()))
    assert manifest["settings"]["filters"]["min_stop_words"] == 2


def test_an_unknown_preset_exits_64_naming_the_allowed_ones(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(HEAD + '[filters]\npreset = "dolma"\n', encoding="utf-8")
    out = corpus("hash", str(cfg), check=False)
    assert out.returncode == 64 and out.stdout == ""
    [line] = out.stderr.strip().splitlines()
    assert "unknown preset 'dolma' in [filters]; allowed: c4, fineweb, gopher" in line


def test_a_c4_build_writes_the_text_its_line_rules_leave(tmp_path: Path) -> None:
    """C4's line rules shorten a kept document in the shards: a line without terminal
    punctuation and a cookie-policy line are gone, the sentences stay."""
    lines = MILL.replace(". ", ".\n").splitlines()
    text = "\n".join(
        [lines[0], "Share this page", *lines[1:3], "We use a cookie policy.", *lines[3:]]
    )
    (tmp_path / "in.jsonl").write_text(json.dumps({"text": text}) + "\n", encoding="utf-8")
    cfg = tmp_path / "c.toml"
    cfg.write_text(HEAD + SOURCE + '[filters]\npreset = "c4"\n', encoding="utf-8")
    root = str(tmp_path / "root")
    corpus("run", "--stage", "fetch", "--config", str(cfg), "--root", root)
    out = json.loads(corpus("run", "--stage", "shard", "--config", str(cfg), "--root", root).stdout)
    manifest_path = tmp_path / "root" / str(out["manifest"])
    manifest = json.loads(manifest_path.read_text())

    (shard,) = manifest["shards"]
    [kept] = (
        pq.read_table(manifest_path.parent / shard["name"], columns=["text"]).column(0).to_pylist()
    )
    assert kept == "\n".join(lines)
