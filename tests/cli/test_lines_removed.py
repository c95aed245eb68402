"""C4's line rules: the lines they remove are counted, by reason, in the shards manifest."""

from __future__ import annotations

import json
import os
from pathlib import Path

from support.corpus import run_corpus

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
HEAD = (
    'dataset = "t"\nversion = "v1"\ntokenizer = {id = "bytes"}\n'
    '[[sources]]\nname = "docs"\nkind = "jsonl"\npath = "in.jsonl"\nlicense = "mit"\n'
    '[licenses]\nallow = ["mit"]\n'
)
BODY = (
    "The keeper climbed the stairs of the old lighthouse every evening at dusk.\n"
    "He lit the great lamp and watched the ships pass far out on the grey sea.\n"
)
DOCS = [
    "Menu\n" + BODY + "Share this page\n",  # two lines without terminal punctuation
    BODY + "Read more\n",  # one
    BODY,  # none
    "Home\nAbout\n",  # too short: dropped by a check before C4's pass, nothing counted
]


def build(tmp_path: Path, filters: str) -> dict[str, object]:
    lines = "".join(json.dumps({"text": t}) + "\n" for t in DOCS)
    (tmp_path / "in.jsonl").write_text(lines, encoding="utf-8")
    cfg = tmp_path / "c.toml"
    cfg.write_text(HEAD + filters, encoding="utf-8")
    root = tmp_path / "root"
    run_corpus("run", "--stage", "fetch", "--config", cfg, "--root", root, environ=ENV, check=True)
    out = run_corpus(
        "run", "--stage", "shard", "--config", cfg, "--root", root, environ=ENV, check=True
    )
    manifest: dict[str, object] = json.loads(
        (root / json.loads(out.stdout)["manifest"]).read_text()
    )
    return manifest


def test_the_lines_c4_removes_are_counted_by_reason(tmp_path: Path) -> None:
    filters = "[filters]\nc4_terminal_punctuation = true\nmin_words = 5\nmin_chars = 20\n"
    manifest = build(tmp_path, filters)
    assert manifest["lines_removed"] == {"no_terminal_punctuation": 3}
    assert manifest["documents_out"] == 1  # the three copies of BODY are one
    assert manifest["dropped"] == {"too_few_chars": 1}


def test_without_line_rules_there_is_no_count(tmp_path: Path) -> None:
    assert "lines_removed" not in build(tmp_path, "")
