"""Eval-set decontamination in the shard stage: seeded copies dropped or cut, and audited.

The corpus and the eval set are generated from one seeded vocabulary of made-up words, so two
texts share a word n-gram only where the test put one there.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from corpus_assets.core.config import load_config
from corpus_assets.core.errors import ConfigError, DataError
from corpus_assets.core.stages import audit
from corpus_assets.core.stages.preflight import preflight
from corpus_assets.core.stages.run import run_stage
from corpus_assets.core.stages.shard_verify import verify_shards
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.text import ngrams
from corpus_assets.core.text.contamination import CutSpec, build_index, cut, find
from corpus_assets.core.text.ngrams import ngram_hashes, words

RNG = random.Random(16)
VOCAB = sorted(
    {
        "".join(RNG.choice("abcdefghiklmnoprstuvw") for _ in range(RNG.randint(3, 8)))
        for _ in range(3000)
    }
)
ITEMS = 12


def prose(rng: random.Random, n: int) -> str:
    """`n` words of sentences (capitalized, with periods) from the shared vocabulary."""
    out: list[str] = []
    while len(out) < n:
        sentence = [rng.choice(VOCAB) for _ in range(rng.randint(6, 14))]
        sentence[0] = sentence[0].capitalize()
        sentence[-1] += "."
        out.extend(sentence)
    return " ".join(out[:n])


def eval_rows() -> list[dict[str, Any]]:
    rng = random.Random(1)
    return [
        {"qid": f"q{i}", "question": prose(rng, 30) + "?", "answer": prose(rng, 8)}
        for i in range(ITEMS)
    ]


def seeded_corpus() -> tuple[list[dict[str, str]], dict[str, str]]:
    """Clean documents plus one seeded document per way of copying; `seeded` maps id to item."""
    rng = random.Random(2)
    items = eval_rows()
    docs = [{"id": f"clean-{i}", "text": prose(rng, 120)} for i in range(40)]
    seeded: dict[str, str] = {}

    def seed(doc_id: str, item: int, text: str) -> None:
        docs.append({"id": doc_id, "text": text})
        seeded[doc_id] = items[item]["qid"]

    q = [it["question"] for it in items]
    seed("verbatim", 0, f"{prose(rng, 60)} {q[0]} {prose(rng, 60)}")
    seed(
        "spacing-case",
        1,
        f"{prose(rng, 40)}\n\n  {q[1].upper().replace(' ', '   ')}\n{prose(rng, 40)}",
    )
    seed("punctuation", 2, prose(rng, 30) + " " + q[2].replace(" ", ", ").replace(".", "!") + "")
    seed(
        "partial-quote",
        3,
        f'{prose(rng, 50)} As they say, "{" ".join(q[3].split()[5:20])}" {prose(rng, 50)}',
    )
    seed("answer-field", 4, f"{prose(rng, 50)} {q[4]} {items[4]['answer']}")
    seed("nfkc", 5, prose(rng, 40) + " " + q[5].replace("a", "\uff41"))  # fullwidth a: NFKC a
    return docs, seeded


def short_phrase_docs() -> list[dict[str, str]]:
    """Documents that share only 8-word phrases with eval items."""
    rng = random.Random(3)
    return [
        {
            "id": f"phrase-{i}",
            "text": f"{prose(rng, 60)} {' '.join(it['question'].split()[2:10])} {prose(rng, 60)}",
        }
        for i, it in enumerate(eval_rows()[6:10])
    ]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def setup(tmp: Path, docs: list[dict[str, str]], decon: dict[str, Any] | None) -> Path:
    write_jsonl(tmp / "docs.jsonl", docs)
    write_jsonl(tmp / "evals.jsonl", eval_rows())
    raw: dict[str, Any] = {
        "dataset": "decon",
        "version": "v1",
        "tokenizer": {"id": "bytes"},
        "sources": [
            {
                "name": "docs",
                "kind": "jsonl",
                "path": "docs.jsonl",
                "id_field": "id",
                "license": "mit",
            }
        ],
        "dedup": {"near": False},
    }
    if decon is not None:
        raw["decontaminate"] = decon
    path = tmp / "c.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def arith_set(**changes: Any) -> dict[str, Any]:
    return {
        "name": "evals",
        "path": "evals.jsonl",
        "fields": ["question", "answer"],
        "id_field": "qid",
        **changes,
    }


def shard(tmp: Path, cfg: Path) -> dict[str, Any]:
    root = tmp / "root"
    run_stage("fetch", cfg, root, workers=1)
    return run_stage("shard", cfg, root, workers=2)


def shard_ids(tmp: Path, summary: dict[str, Any]) -> dict[str, str]:
    folder = (tmp / "root" / summary["manifest"]).parent
    out: dict[str, str] = {}
    for f in sorted(folder.glob("shard-*.parquet")):
        t = pq.read_table(f)
        out.update(zip(t.column("id").to_pylist(), t.column("text").to_pylist(), strict=True))
    return out


def audit_records(tmp: Path, summary: dict[str, Any]) -> list[dict[str, Any]]:
    path = (tmp / "root" / summary["manifest"]).parent / "audit.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_words_are_nfkc_lowercase_without_punctuation() -> None:
    assert words("Don't  STOP—the ﬁle_name, “ＡＢＣ” 3.14!") == [
        "don",
        "t",
        "stop",
        "the",
        "file",
        "name",
        "abc",
        "3",
        "14",
    ]
    a, b = ngram_hashes(["Hello, World! this is it.", "x", "HELLO world\n\tthis IS"], 3), None
    assert a.doc.tolist() == [0, 0, 0, 2, 2]
    assert a.hashes[0] == a.hashes[3] and a.hashes[1] == a.hashes[4]
    assert b is None


def test_index_and_find_name_the_first_item() -> None:
    index, short = build_index(
        [("a", ["one two three four"]), ("b", ["two three four five"]), ("c", ["x"])], 3
    )
    assert short == 1 and len(index.hashes) == 3 and index.ids == ("a", "b", "c")
    hits = find(
        ngram_hashes(["zero one two three", "nothing here at all", "three four five"], 3), index
    )
    assert {d: (index.ids[h.item], h.ngrams) for d, h in hits.items()} == {0: ("a", 1), 2: ("b", 1)}


def test_cut_removes_the_match_and_its_window() -> None:
    index, _ = build_index([("a", ["alpha beta gamma delta"])], 3)
    text = "x" * 300 + " keep this. Alpha, BETA gamma delta! " + "y " * 200
    out = cut(text, [index], 3, CutSpec(window=20, min_chars=50, max_pieces=10))
    assert out is not None and "lpha" not in out.lower() and out.startswith("x" * 250)
    assert cut(text, [index], 3, CutSpec(window=20, min_chars=500)) is None  # pieces too short
    many = " ".join(["alpha beta gamma " + "z" * 60] * 5)
    assert cut(many, [index], 3, CutSpec(window=0, min_chars=1, max_pieces=3)) is None


def test_drop_mode_drops_every_seeded_document_and_audits_it(tmp_path: Path) -> None:
    docs, seeded = seeded_corpus()
    docs += short_phrase_docs()
    summary = shard(tmp_path, setup(tmp_path, docs, {"sets": [arith_set()]}))
    kept = shard_ids(tmp_path, summary)
    assert not set(seeded) & set(kept)
    assert {d["id"] for d in docs} - set(seeded) == set(kept)  # clean and short phrases kept
    records = audit_records(tmp_path, summary)
    assert {(r["id"], r["reason"], r["set"], r["item"]) for r in records} == {
        (doc_id, "contaminated", "evals", item) for doc_id, item in seeded.items()
    }
    assert summary["dropped"]["contaminated"] == len(seeded)
    assert summary["contaminated"] == {"evals": len(seeded)}
    manifest = json.loads((tmp_path / "root" / summary["manifest"]).read_text())
    (entry,) = manifest["decontamination"]["sets"]
    assert entry["documents_dropped"] == len(seeded) and entry["items"] == ITEMS
    assert manifest["decontamination"] == {"ngram": 13, "mode": "drop", "sets": [entry]}
    assert manifest["audit"]["rows"] == len(seeded)
    cfg = load_config(tmp_path / "c.json")
    layout = Layout((tmp_path / "root").resolve())
    assert audit.decontaminated(cfg, layout).passed
    assert audit.manifest_valid(cfg, layout, "shards").passed


def test_ngram_length_decides_short_phrases(tmp_path: Path) -> None:
    phrases = short_phrase_docs()
    docs = [{"id": f"clean-{i}", "text": prose(random.Random(100 + i), 100)} for i in range(10)]
    summary = shard(tmp_path, setup(tmp_path, docs + phrases, {"ngram": 8, "sets": [arith_set()]}))
    kept = shard_ids(tmp_path, summary)
    assert not {p["id"] for p in phrases} & set(kept)
    assert summary["contaminated"] == {"evals": len(phrases)}


def test_check_finds_an_eval_ngram_left_in_the_shards(tmp_path: Path) -> None:
    docs, seeded = seeded_corpus()
    summary = shard(tmp_path, setup(tmp_path, docs, None))  # built without the section
    assert set(seeded) <= set(shard_ids(tmp_path, summary))
    built = (tmp_path / "root" / summary["manifest"]).parent
    cfg = load_config(setup(tmp_path, docs, {"sets": [arith_set()]}))
    layout = Layout((tmp_path / "root").resolve())
    layout.shards(cfg).parent.mkdir(parents=True, exist_ok=True)
    layout.shards(cfg).symlink_to(built)  # the audit of this config reads the old build
    found = audit.decontaminated(cfg, layout)
    assert not found.passed and len(found.problems) == len(seeded)  # one line per document
    assert "item 'q0'" in " ".join(found.problems)


def test_cut_mode_keeps_what_is_left_and_drops_short_rests(tmp_path: Path) -> None:
    rng = random.Random(9)
    q = eval_rows()[0]["question"]
    long_doc = f"{prose(rng, 120)}\n\n{q}\n\n{prose(rng, 120)}"
    short_doc = f"{prose(rng, 15)} {q} {prose(rng, 15)}"
    docs = [{"id": "long", "text": long_doc}, {"id": "short", "text": short_doc}]
    docs += [{"id": f"clean-{i}", "text": prose(rng, 100)} for i in range(5)]
    summary = shard(tmp_path, setup(tmp_path, docs, {"mode": "cut", "sets": [arith_set()]}))
    kept = shard_ids(tmp_path, summary)
    assert "short" not in kept and "long" in kept
    assert len(kept["long"]) < len(long_doc) - len(q) and q.split()[3] not in kept["long"].split()
    records = {r["id"]: r for r in audit_records(tmp_path, summary)}
    assert records["long"]["reason"] == "cut" and records["short"]["reason"] == "contaminated"
    assert records["long"]["item"] == "q0" and records["long"]["set"] == "evals"
    manifest = json.loads((tmp_path / "root" / summary["manifest"]).read_text())
    (entry,) = manifest["decontamination"]["sets"]
    assert (entry["documents_dropped"], entry["documents_cut"]) == (1, 1)
    cfg = load_config(tmp_path / "c.json")
    assert audit.decontaminated(cfg, Layout((tmp_path / "root").resolve())).passed


def test_a_config_without_the_section_hashes_as_before(tmp_path: Path) -> None:
    hand = {"version": "v1", "dataset": "tinystories", "tokenizer": {"id": "bytes"}}
    path = tmp_path / "hand.json"
    path.write_text(json.dumps(hand), encoding="utf-8")
    assert load_config(path).sha256 == (
        "a03711ec959b2a8fb6cf51d9445bee90fcb69a103cfa033483b52f836269c0a6"
    )
    path.write_text(
        json.dumps({**hand, "decontaminate": {"sets": [arith_set()]}}), encoding="utf-8"
    )
    with_section = load_config(path)
    assert with_section.sha256 != "a03711ec959b2a8fb6cf51d9445bee90fcb69a103cfa033483b52f836269c0a6"
    assert with_section.model.decontaminate is not None
    assert with_section.model.decontaminate.ngram == 13


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"mode": "chop"}, "unknown mode 'chop'; allowed: drop, cut"),
        ({"ngram": 0}, "decontaminate.ngram: Input should be greater than or equal to 1"),
        ({"sets": [arith_set(path="nope.jsonl")]}, "eval set 'evals': file not found:"),
        (
            {"sets": [arith_set(fields=["question", "solution"])]},
            "no field 'solution'; fields: answer, qid, question",
        ),
        ({"sets": [arith_set(id_field="uid")]}, "no value for id_field 'uid'"),
        (
            {"sets": [{"name": "evals", "path": "evals.jsonl"}]},
            "missing required key 'decontaminate.sets[0] (evals).fields'",
        ),
        ({"sets": [arith_set(hf="org/set")]}, "set exactly one of path"),
        ({"sets": [arith_set(), arith_set()]}, "eval set names must be unique; repeated: evals"),
        ({"sets": [arith_set(windw=3)]}, "unknown key 'windw'"),
    ],
)
def test_preflight_names_what_is_wrong(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    path = setup(tmp_path, [], {"sets": [arith_set()], **change})
    with pytest.raises(ConfigError) as caught:
        preflight(load_config(path))
    assert message in str(caught.value)
    assert not (tmp_path / "root").exists()


def test_fields_are_indexed_each_on_its_own() -> None:
    index, _ = build_index([("a", ["one two three", "four five six"])], 3)
    found = find(ngram_hashes(["x four five six y", "two three four"], 3), index)
    assert list(found) == [0]  # "two three four" spans the two fields: not an n-gram of the item


def test_pins_bad_later_items_and_changed_audits(tmp_path: Path) -> None:
    docs, _ = seeded_corpus()
    cfg = setup(tmp_path, docs, {"sets": [arith_set()]})
    summary = shard(tmp_path, cfg)
    manifest = tmp_path / "root" / summary["manifest"]
    (manifest.parent / "audit.jsonl").write_text("{}\n", encoding="utf-8")
    assert any("audit.jsonl" in p for p in verify_shards(manifest))
    sha = hashlib.sha256((tmp_path / "evals.jsonl").read_bytes()).hexdigest()
    late = json.dumps({"qid": "late", "question": "no answer field here"}) + "\n"
    pinned = setup(tmp_path, docs, {"sets": [arith_set(sha256=sha)]})  # rewrites evals.jsonl
    with (tmp_path / "evals.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(late)
    with pytest.raises(DataError, match="pinned"):
        run_stage("shard", pinned, tmp_path / "root", workers=1)
    later = setup(tmp_path, docs, {"ngram": 12, "sets": [arith_set()]})
    with (tmp_path / "evals.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(late)
    with pytest.raises(ConfigError, match=r"evals.jsonl:13: no field 'answer'"):
        run_stage("shard", later, tmp_path / "root", workers=1)


def test_screened_builds_are_byte_identical_for_any_worker_count(tmp_path: Path) -> None:
    docs, seeded = seeded_corpus()  # after 2,100 more documents: in the third task (row group)
    rng = random.Random(7)
    docs = [{"id": f"more-{i}", "text": prose(rng, 25)} for i in range(2100)] + docs
    cfg = setup(tmp_path, docs, {"mode": "cut", "min_chars": 20, "sets": [arith_set()]})
    outputs = []
    for workers in (1, 2):
        root = tmp_path / f"root-w{workers}"
        run_stage("fetch", cfg, root, workers=1)
        summary = run_stage("shard", cfg, root, workers=workers)
        folder = (root / summary["manifest"]).parent
        outputs.append({p.name: p.read_bytes() for p in sorted(folder.iterdir())})
    assert outputs[0] == outputs[1]
    assert [json.loads(r)["id"] for r in outputs[0]["audit.jsonl"].splitlines()] == list(seeded)


def test_ngram_hashes_agree_with_the_words_and_do_not_collide(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(11)
    long_words = ["".join(rng.choice("xyz") for _ in range(rng.randint(9, 30))) for _ in range(50)]
    texts = [
        prose(rng, rng.randint(5, 60)) + " " + " ".join(rng.choices(long_words, k=5))
        for _ in range(400)
    ]
    grams = ngram_hashes(texts, 4)
    strings = [
        (d, " ".join(ws[i : i + 4]))
        for d, ws in enumerate(words(t) for t in texts)
        for i in range(len(ws) - 3)
    ]
    assert grams.doc.tolist() == [d for d, _ in strings]
    by_string: dict[str, int] = {}
    for h, (_, s) in zip(grams.hashes.tolist(), strings, strict=True):
        assert by_string.setdefault(s, h) == h  # the same n-gram hashes the same everywhere
    assert len(set(by_string.values())) == len(by_string)  # and distinct ones differently
    monkeypatch.setattr(ngrams, "CHUNK_BYTES", 1000)  # many chunks: the same hashes and docs
    chunked = ngram_hashes(texts, 4)
    assert chunked.hashes.tolist() == grams.hashes.tolist()
    assert chunked.doc.tolist() == grams.doc.tolist()


def test_an_uncached_hub_eval_set_offline_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    docs, _ = seeded_corpus()
    hub_set = {"name": "gsm", "hf": "no-such-org/no-such-set", "fields": ["question"]}
    cfg = setup(tmp_path, docs, {"sets": [hub_set]})
    run_stage("fetch", cfg, tmp_path / "root", workers=1)
    with pytest.raises(ConfigError, match="is not cached and HF_HUB_OFFLINE is set"):
        run_stage("shard", cfg, tmp_path / "root", workers=1)
