"""examples/quality builds as its README says: two classifiers trained, two corpora built on a
fresh data root, each corpus naming the partition key its classifier config gives."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "quality"


def corpus(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "corpus_assets.cli", *args]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("quality-examples") / "root"


def shards_of(root: Path, dataset: str) -> tuple[dict[str, object], list[dict[str, object]]]:
    (manifest,) = (root / "corpus" / dataset / "v1").glob("*/_MANIFEST.json")
    m = json.loads(manifest.read_text(encoding="utf-8"))
    rows = [r for s in m["shards"] for r in pq.read_table(manifest.parent / s["name"]).to_pylist()]
    return m, rows


@pytest.mark.parametrize(("kind", "dataset"), [("dclm", "quality-dclm"), ("edu", "quality-edu")])
def test_the_example_trains_and_builds(root: Path, kind: str, dataset: str) -> None:
    train = EXAMPLES / f"{kind}-classifier.toml"
    trained = json.loads(
        corpus("classifier", "train", str(train), "--root", str(root), "--json").stdout
    )
    config = (EXAMPLES / f"{kind}-corpus.toml").read_text(encoding="utf-8")
    named = re.search(r'^model = "([^"]+)"', config, re.M)
    assert named is not None and named[1] == trained["partition_key"]
    corpus("build", str(EXAMPLES / f"{kind}-corpus.toml"), "--root", str(root))

    m, rows = shards_of(root, dataset)
    (entry,) = m["classifiers"]  # type: ignore[misc]
    column = entry["column"]
    scores = [r[column] for r in rows]
    assert len(rows) == entry["kept"] == m["documents_out"]
    assert sum(entry["histogram"]) == entry["scored"]
    if "keep_top" in entry:  # exactly ceil(10 %) of the scored survivors, the best ones
        assert entry["kept"] == math.ceil(entry["scored"] * 0.1 - 1e-9)
        assert min(scores) == entry["score_at_cut"]
    else:
        assert min(scores) >= 0.5
    web = [r for r in rows if r["source"] == "web"]
    assert len(web) < len(rows) / 20  # the web pages go, the stories stay
