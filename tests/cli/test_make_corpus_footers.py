"""bench/make_corpus.py --footers: near copies that are an earlier document plus a footer line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from corpus_assets.core.text.minhash import jaccard
from corpus_assets.core.text.normalize import normalize

MAKE_CORPUS = Path(__file__).resolve().parents[2] / "bench" / "make_corpus.py"


def make(out: Path, *extra: str) -> tuple[dict[str, Any], dict[str, str]]:
    cmd = [sys.executable, str(MAKE_CORPUS), "--out", str(out), "--mb", "0.5", *extra]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    truth = json.loads((out / "truth.json").read_text(encoding="utf-8"))
    docs = {}
    for part in sorted(out.glob("part-*.jsonl")):
        for line in part.read_text(encoding="utf-8").splitlines():
            doc = json.loads(line)
            docs[doc["id"]] = doc["text"]
    return truth, docs


def test_footer_copies_are_near_copies_of_their_original(tmp_path: Path) -> None:
    truth, docs = make(tmp_path / "f", "--footers", "0.05")
    footers = {i: n for i, n in truth["near"].items() if "footer" in n}
    assert len(footers) >= 10
    for doc_id, near in footers.items():
        original = docs[near["of"]]
        assert docs[doc_id] in (f"{original}\n{near['footer']}", f"{original}\n\n{near['footer']}")
        assert near["of"] in truth["unique"] and near["of"] < doc_id
        assert jaccard(normalize(original), normalize(docs[doc_id]), 5) >= 0.8
    assert {n["footer"] for n in footers.values()} <= set(_footers())


def test_without_footers_the_corpus_has_none(tmp_path: Path) -> None:
    plain, _ = make(tmp_path / "p")
    zero, _ = make(tmp_path / "z", "--footers", "0")
    assert plain == zero and not any("footer" in n for n in plain["near"].values())


def _footers() -> list[str]:
    sys.path.insert(0, str(MAKE_CORPUS.parent))
    import make_corpus

    return list(make_corpus.FOOTERS)
