"""Bad `[decontaminate]` and `[exclude]` sections through the CLI: exit 64, nothing written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.corpus import run_corpus

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
HEAD = (
    'dataset = "t"\nversion = "v1"\ntokenizer = {id = "bytes"}\n'
    '[[sources]]\nname = "s"\nkind = "jsonl"\npath = "in.jsonl"\nlicense = "mit"\n'
)
EVAL_SET = '[[decontaminate.sets]]\nname = "e"\npath = "{path}"\nfields = ["q"]\n'


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('[decontaminate]\nmode = "chop"\n' + EVAL_SET.format(path="e.jsonl"), "unknown mode"),
        ("[decontaminate]\nngram = 0\n" + EVAL_SET.format(path="e.jsonl"), "ngram"),
        ("[decontaminate]\n" + EVAL_SET.format(path="gone.jsonl"), "file not found"),
        ("[decontaminate]\n" + EVAL_SET.format(path="e.jsonl").replace('"q"', '"x"'), "no field"),
        ('[[exclude.ids]]\nname = "l"\npath = "gone.txt"\n', "exclude list 'l': file not found"),
    ],
)
def test_bad_sections_exit_64_before_anything(tmp_path: Path, body: str, message: str) -> None:
    (tmp_path / "in.jsonl").write_text('{"text": "hello"}\n', encoding="utf-8")
    (tmp_path / "e.jsonl").write_text('{"q": "a question"}\n', encoding="utf-8")
    cfg = tmp_path / "c.toml"
    cfg.write_text(HEAD + body, encoding="utf-8")
    root = tmp_path / "root"
    for stage in ("fetch", "shard"):
        proc = run_corpus(
            "run", "--stage", stage, "--config", cfg, "--root", root, environ=ENV, timeout=120
        )
        assert proc.returncode == 64, proc.stderr
        assert message in proc.stderr and proc.stderr.count("\n") == 1
    assert not root.exists()
