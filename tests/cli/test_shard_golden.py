"""The shard stage's bytes on a fixed benchmark corpus, recorded before the on-disk LSH index.

The 4 MB corpus of `bench/make_corpus.py` (seed 0) is built with three dedup settings; the shard
files' sha256, row counts and the duplicate counts must be exactly what the in-memory
near dedup (one connected-components pass in memory) published. A change to dedup, partial copies,
PII or the writer that moves one byte fails here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from support.corpus import make_bench_corpus, run_corpus

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}

GOLDEN: dict[str, dict[str, Any]] = {
    "default": {
        "dedup": "",
        "duplicates": {"exact": 148, "near": 125},
        "partial": 32,
        "shards": [
            ("a815a6b3c07f9e9ee8a5fda313ffab35939ba8405807f1b75819e7109fe6322f", 697),
            ("e75775c7d9af16bd6ab97a8d8e6a20592131b762dde1d11a713d493a497fc017", 697),
            ("110b8988fd4b96d4439cccdcde718392bb2adc0c67a4564467630dd8976475ff", 696),
            ("9004c43775c59ff797603feb64c463b2b82dc77357f365b6246c9dabceb192b7", 204),
        ],
    },
    "estimate_only": {
        "dedup": "[dedup]\nconfirm = false\n",
        "duplicates": {"exact": 148, "near": 114},
        "partial": 32,
        "shards": [
            ("f1529c32735b68ef4d06f1744dd7ee7f2b5dfd759fdb998af9581b5280498240", 699),
            ("f60d7d63d82ae80de16076629004fb4ebcb203b5f7a2438a2782eed7cc22be83", 698),
            ("4861db19d85a9043332321a13f5ca2190540656a345a9222000e2bc7e77892de", 700),
            ("55eb681517cd1e63d473f3fb36e37767ff3e9187d9e1e6035796ea17b9c0df1e", 208),
        ],
    },
    "30_bands_no_partial": {
        "dedup": "[dedup]\npartial = false\nbands = 30\nthreshold = 0.7\n",
        "duplicates": {"exact": 148, "near": 157},
        "partial": 0,
        "shards": [
            ("a7667bee7f0d8825c03cebaebf0b2d51c513c4b49a80da7732302a9a0bf059c6", 688),
            ("0ba09c4c43a71cbe816f355b963b8e3d667c2ee91f9edab4febe66d014bbcc7b", 686),
            ("05943ae0dbc0b31e1fd63339002fcb141e6f2375503b3b86558fd98fee3d297f", 692),
            ("3ff96cf509dc2361b8fcc6ca65e51bb6089fadf1ecdd4ae3991ee466f20f894a", 196),
        ],
    },
}


def corpus(*args: str) -> dict[str, Any]:
    proc = run_corpus(*args, environ=ENV, check=True)
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_bench_corpus(tmp_path_factory.mktemp("golden") / "corpus", 4)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_shards_are_the_recorded_bytes(tmp_path: Path, data: Path, name: str) -> None:
    golden = GOLDEN[name]
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        'dataset = "t"\nversion = "v1"\ntokenizer = {id = "bytes"}\n'
        f'[[sources]]\nname = "bench"\nkind = "jsonl"\npath = "{data}/part-*.jsonl"\n'
        'id_field = "id"\nlicense = "cdla-sharing-1.0"\n'
        "[shards]\ntarget_mb = 1.0\n" + golden["dedup"],
        encoding="utf-8",
    )
    root = tmp_path / "root"
    corpus("run", "--stage", "fetch", "--config", str(cfg), "--root", str(root))
    summary = corpus(
        "run", "--stage", "shard", "--config", str(cfg), "--root", str(root), "--workers", "2"
    )
    manifest = json.loads((root / summary["manifest"]).read_text(encoding="utf-8"))
    assert manifest["duplicates"] == golden["duplicates"]
    assert manifest["partial_copies"] == golden["partial"]
    assert [(s["sha256"], s["rows"]) for s in manifest["shards"]] == golden["shards"]
