"""Quality classifiers in the shard stage: the config, the model found and pinned, the scores,
the `min_score` drops and the `keep_top` cut (core/stages/shard_quality.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.classifier import built_classifier, documents, train

from corpus_assets.core.config import LoadedConfig, validate
from corpus_assets.core.errors import ConfigError
from corpus_assets.core.stages.shard_quality import (
    BINS,
    Classifier,
    Cut,
    classifiers,
    histogram,
    keep_count,
    keep_top,
    score_texts,
    top,
)
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.progress import Progress
from corpus_assets.core.text.quality import Scorer, classifier_text, load_model

KEY = "edu-0123456789ab"


def config(base: Path, *tables: dict[str, Any]) -> LoadedConfig:
    raw = {
        "dataset": "t",
        "version": "v1",
        "tokenizer": {"id": "bytes"},
        "filters": {"classifiers": list(tables)},
    }
    return validate(raw, base)


def found(cfg: LoadedConfig, root: Path) -> list[Classifier]:
    return classifiers(cfg, Layout(root), lambda _line: None)


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return train(tmp_path)


# keep_top: k and the cut


@pytest.mark.parametrize(
    ("share", "n", "k"),
    [(0.3, 10, 3), (0.1, 30, 3), (0.7, 10, 7), (1.0, 7, 7), (0.5, 0, 0), (1e-9, 5, 1), (0.5, 3, 2)],
)
def test_keep_count_is_the_decimal_ceiling(share: float, n: int, k: int) -> None:
    assert keep_count(share, n) == k  # 0.1 * 30 is 3.0000000000000004 in binary floats


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]), st.booleans()), max_size=60),
    st.floats(min_value=0.0, max_value=1.0),
)
def test_top_is_a_sorted_cut_with_row_order_for_ties(
    rows: list[tuple[float, bool]], share: float
) -> None:
    scores = np.array([s for s, _c in rows], dtype=np.float64)
    candidates = np.array([c for _s, c in rows], dtype=bool)
    k = int(share * candidates.sum())
    ranked = sorted((-s, i) for i, (s, c) in enumerate(rows) if c)
    expected = {i for _s, i in ranked[:k]}
    assert set(np.flatnonzero(top(scores, candidates, k)).tolist()) == expected


# scores


def test_scores_are_the_models_probability_of_the_label(tmp_path: Path, model: Path) -> None:
    cfg = config(tmp_path, {"name": "edu", "model": "model.bin", "label": "hq", "min_score": 0.5})
    (edu,) = found(cfg, tmp_path / "root")
    texts = [*documents(50), "Line one\nline two\tand three  spaced"]
    scored = score_texts([edu], texts)
    raw = load_model(str(model))
    expected = []
    for text in texts:
        labels, probs = raw.predict(classifier_text(text), k=-1, threshold=0.0)
        expected.append(min(float(dict(zip(labels, probs, strict=True))["__label__hq"]), 1.0))
    assert scored.scores["edu"].tolist() == expected == Scorer(model, "hq").many(texts)
    assert scored.reasons == [None if s >= 0.5 else "quality_edu" for s in expected]
    assert 0 < scored.reasons.count(None) < len(texts)
    stats = scored.stats["edu"]
    assert stats["histogram"] == histogram(expected) and sum(stats["histogram"]) == len(texts)
    assert stats["lowest_kept"] == min(s for s in expected if s >= 0.5)


def test_a_min_score_classifier_leaves_the_next_only_its_survivors(
    tmp_path: Path, model: Path
) -> None:
    cfg = config(
        tmp_path,
        {"name": "a", "model": "model.bin", "label": "hq", "min_score": 0.5},
        {"name": "b", "model": "model.bin", "label": "lq", "min_score": 0.2},
    )
    a, b = found(cfg, tmp_path / "root")
    texts = documents(40)
    scored = score_texts([a, b], texts)
    first = np.array(Scorer(model, "hq").many(texts))
    assert np.isnan(scored.scores["b"][first < 0.5]).all()
    assert sum(scored.stats["b"]["histogram"]) == int((first >= 0.5).sum())
    second = np.array(Scorer(model, "lq").many(texts))
    expected = ["quality_a" if f < 0.5 else "quality_b" if s < 0.2 else None
                for f, s in zip(first, second, strict=True)]  # fmt: skip
    assert scored.reasons == expected


def test_histogram_bins_are_equal_over_0_to_1() -> None:
    counts = histogram([0.0, 0.049, 0.05, 0.5, 0.999, 1.0])
    assert len(counts) == BINS and counts[0] == 2 and counts[1] == 1 and counts[10] == 1
    assert counts[19] == 2


# the config: kinds, pins, the one-line errors


def test_a_local_model_is_pinned_by_its_sha256(tmp_path: Path, model: Path) -> None:
    table = {"name": "edu", "model": "model.bin", "label": "hq", "keep_top": 0.5}
    cfg = config(tmp_path, table)
    pin = cfg.raw["filters"]["classifiers"][0]["model_sha256"]
    (edu,) = found(cfg, tmp_path / "root")
    assert edu.model_sha256 == pin and edu.path == model and not edu.lowercase
    assert config(tmp_path, {**table, "model_sha256": pin}).sha256 == cfg.sha256
    model.write_bytes(model.read_bytes() + b"\0")
    with pytest.raises(ConfigError, match=r"'edu'.*model changed since the config was written"):
        config(tmp_path, {**table, "model_sha256": pin})
    assert config(tmp_path, table).sha256 != cfg.sha256  # unpinned: another build


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"model": "model.bin", "label": "hq"}, "set exactly one of min_score"),
        ({"model": "model.bin", "min_score": 0.5, "keep_top": 0.5}, "set exactly one of min_score"),
        ({"model": "model.bin", "keep_top": 0.5}, "label is required"),
        ({"model": "model.bin", "label": "hq", "keep_top": 0}, "greater than 0"),
        ({"model": "model.bin", "label": "hq", "min_score": 1.5}, "less than or equal to 1"),
        ({"model": "nope.bin", "label": "hq", "min_score": 0.5}, "model file not found"),
        ({"model": "https://h/m.bin", "label": "hq", "min_score": 0.5}, "needs model_sha256"),
        ({"model": "model.txt", "label": "hq", "min_score": 0.5}, "none of: a classifier"),
        ({"model": "ftp://h/m.bin", "label": "hq", "min_score": 0.5}, "scheme 'ftp'"),
        ({"name": "Edu", "model": "model.bin", "min_score": 0.5}, "cannot name a column"),
    ],
)
def test_bad_classifier_tables_are_one_config_error(
    tmp_path: Path, model: Path, table: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        config(tmp_path, {"name": "edu", **table})
    assert "\n" not in str(caught.value)


def test_two_classifiers_of_one_name_are_refused(tmp_path: Path, model: Path) -> None:
    table = {"name": "edu", "model": "model.bin", "label": "hq", "min_score": 0.5}
    with pytest.raises(ConfigError, match="classifier names must be unique; repeated: edu"):
        config(tmp_path, table, table)


def test_a_label_the_model_lacks_is_refused_with_its_labels(tmp_path: Path, model: Path) -> None:
    cfg = config(tmp_path, {"name": "edu", "model": "model.bin", "label": "good", "min_score": 0.5})
    with pytest.raises(ConfigError, match=r"label 'good' is not one of .*allowed: (hq, lq|lq, hq)"):
        found(cfg, tmp_path / "root")


# a classifier trained here, by partition key


def test_a_partition_key_takes_label_and_lowercase_from_its_manifest(
    tmp_path: Path, model: Path
) -> None:
    root = tmp_path / "root"
    folder = built_classifier(root, KEY, model, lowercase=True)
    (edu,) = found(config(tmp_path, {"name": "edu", "model": KEY, "keep_top": 0.2}), root)
    assert (edu.path, edu.label, edu.lowercase, edu.model) == (
        folder / "model.bin",
        "hq",
        True,
        KEY,
    )
    manifest = json.loads((folder / "MANIFEST.json").read_text())
    assert edu.model_sha256 == manifest["model"]["sha256"]
    (lq,) = found(
        config(tmp_path, {"name": "edu", "model": KEY, "label": "lq", "min_score": 0}), root
    )
    assert lq.label == "lq"


@pytest.mark.parametrize(
    ("setup", "table", "message"),
    [
        ("none", {}, rf"{KEY} is not built \(no .*MANIFEST.json\)"),
        ("built", {"lowercase": False}, "lowercase = false, but .* trained with lowercase = true"),
        ("built", {"label": "good"}, "label 'good' is not one of"),
        ("built", {"model_sha256": "0" * 64}, "model_sha256 = '0000"),
        ("changed", {}, "has sha256 .*, not the pinned"),
        ("torn", {}, "unreadable manifest"),
        ("other", {}, "is not a classifier manifest of that key"),
        ("unlabelled", {}, "names no positive_label; set label"),
    ],
)
def test_a_partition_key_that_cannot_be_used_is_one_config_error(
    tmp_path: Path, model: Path, setup: str, table: dict[str, Any], message: str
) -> None:
    root = tmp_path / "root"
    if setup != "none":
        folder = built_classifier(root, KEY, model, lowercase=True)
        manifest = folder / "MANIFEST.json"
        if setup == "changed":
            (folder / "model.bin").write_bytes(model.read_bytes()[:-1])
        elif setup == "torn":
            manifest.write_text(manifest.read_text()[:-5])
        elif setup == "other":
            manifest.write_text(manifest.read_text().replace(KEY, "edu-ffffffffffff"))
        elif setup == "unlabelled":
            manifest.write_text(manifest.read_text().replace('"positive_label": "hq", ', ""))
    cfg = config(tmp_path, {"name": "edu", "model": KEY, "min_score": 0.5, **table})
    with pytest.raises(ConfigError, match=message) as caught:
        found(cfg, root)
    assert "\n" not in str(caught.value) and "'edu'" in str(caught.value)


def test_keep_top_cuts_in_config_order_over_what_dedup_and_the_cut_before_left(
    tmp_path: Path,
) -> None:
    a = [0.9, 0.1, 0.8, 0.8, 0.3, 0.7, 0.2, 0.6]  # 8 rows in two task files (5 + 3)
    b = [0.1, 0.9, 0.2, 0.9, 0.5, 0.5, 0.4, 0.3]
    for index, rows in ((0, slice(0, 5)), (2, slice(5, 8))):
        table = pa.table({"quality_a": a[rows], "quality_b": b[rows]})
        pq.write_table(table, tmp_path / f"task-{index}.parquet")
    drop = np.zeros(8, dtype=bool)
    drop[0] = True  # a duplicate: not a candidate, whatever its score
    found = [
        Classifier("a", tmp_path, "hq", False, None, 0.5, "", "m"),
        Classifier("m", tmp_path, "hq", False, 0.5, None, "", "m"),  # min_score: no cut here
        Classifier("b", tmp_path, "hq", False, None, 0.5, "", "m"),
    ]
    out, cuts = keep_top(
        found,
        [(0, 5), (1, 0), (2, 3)],
        lambda i: tmp_path / f"task-{i}.parquet",
        drop,
        Progress("shard", lambda _line: None),
    )
    # a: 7 candidates, k = 4: rows 2 and 3 (0.8), 5 (0.7), 7 (0.6)
    # b: of those 4, k = 2: rows 3 (0.9) and 5 (0.5); rows 2 (0.2) and 7 (0.3) go
    assert np.flatnonzero(~out).tolist() == [3, 5]
    assert cuts["a"] == Cut(7, 4, 0.6) and cuts["b"] == Cut(4, 2, 0.5) and "m" not in cuts
    assert not drop[1:].any()  # the mask given is not changed


def test_a_lowercase_classifier_scores_the_lowercased_line(tmp_path: Path, model: Path) -> None:
    root = tmp_path / "root"
    built_classifier(root, KEY, model, lowercase=True)
    (edu,) = found(config(tmp_path, {"name": "edu", "model": KEY, "min_score": 0.0}), root)
    texts = [t.upper() for t in documents(20)]  # the model knows lowercase words only
    got = score_texts([edu], texts).scores["edu"].tolist()
    assert got == Scorer(model, "hq", lowercase=True).many(texts)
    assert got == Scorer(model, "hq").many([t.lower() for t in texts])
    assert got != Scorer(model, "hq").many(texts)
