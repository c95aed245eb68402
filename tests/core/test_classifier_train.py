"""Training a quality classifier in-process: TinyStories against generated junk, for real."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.junk import (
    STORIES,
    junk_document,
    junk_source,
    stories_source,
    stories_vs_junk,
    write_junk,
)

from corpus_assets.core.classifier_config import (
    CLASSIFIER_KEY,
    CORPUS_KEY,
    LoadedClassifierConfig,
    load_classifier_config,
    validate_classifier,
)
from corpus_assets.core.config import canon, sha256_hex
from corpus_assets.core.errors import ConfigError, DataError, UpstreamMissing
from corpus_assets.core.stages.classifier import TrainResult, roc_auc, train
from corpus_assets.core.stages.classifier_fit import fit
from corpus_assets.core.stages.run import run_stage
from corpus_assets.core.store.digests import file_sha256
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.progress import Progress, silent
from corpus_assets.core.store.registry import PARTITION_KEY
from corpus_assets.core.text.quality import Scorer, classifier_text

WriteConfig = Callable[[Path, Mapping[str, Any]], Path]
REPO = Path(__file__).resolve().parents[2]


def _train(config: Path, root: Path, lines: list[str] | None = None) -> TrainResult:
    emit = silent if lines is None else lines.append
    return train(load_classifier_config(config), Layout(root), Progress("classifier", emit))


@pytest.fixture(scope="module")
def trained(
    tmp_path_factory: pytest.TempPathFactory, write_config: WriteConfig
) -> tuple[Path, TrainResult, TrainResult]:
    """The same config trained on two fresh data roots: (config file, first, second)."""
    folder = tmp_path_factory.mktemp("classifier")
    config = write_config(folder / "stories.toml", stories_vs_junk(folder))
    return config, _train(config, folder / "root-a"), _train(config, folder / "root-b")


def test_the_same_config_gives_the_same_model_bytes_on_two_roots(
    trained: tuple[Path, TrainResult, TrainResult],
) -> None:
    _, first, second = trained
    assert not first.cached and not second.cached
    assert first.folder != second.folder
    assert first.model_sha256 == second.model_sha256
    assert file_sha256(first.folder / "model.bin") == first.model_sha256
    assert (first.folder / "model.bin").read_bytes() == (second.folder / "model.bin").read_bytes()
    assert first.manifest["examples"] == second.manifest["examples"]


def test_stories_and_junk_are_told_apart_on_the_validation_set(
    trained: tuple[Path, TrainResult, TrainResult],
) -> None:
    validation = trained[1].manifest["validation"]
    assert validation["roc_auc"] > 0.9
    assert validation["precision"] > 0.9 and validation["recall"] > 0.9
    scorer = Scorer(trained[1].folder / "model.bin", "hq")  # the published model scores alike
    story = "Once upon a time, a little girl named Lily found a red ball in the park."
    junk = "cheap casino bonus free download crack seo backlinks coupon deal"
    assert scorer(story) > 0.5 > scorer(junk)


def test_the_manifest_says_what_was_trained_and_how(
    trained: tuple[Path, TrainResult, TrainResult],
) -> None:
    config, result, _ = trained
    cfg = load_classifier_config(config)
    on_disk = json.loads((result.folder / "MANIFEST.json").read_text(encoding="utf-8"))
    assert on_disk == result.manifest
    m = result.manifest
    assert m["kind"] == "classifier" and m["name"] == "stories-vs-junk"
    assert m["partition_key"] == result.partition_key == cfg.partition_key
    assert result.folder == Layout(result.folder.parents[1]).classifier(cfg.partition_key)
    assert m["config_sha256"] == cfg.sha256 and m["config"] == cfg.raw
    assert m["model"] == {
        "name": "model.bin",
        "sha256": result.model_sha256,
        "bytes": (result.folder / "model.bin").stat().st_size,
    }
    assert sorted(m["labels"]) == ["cc", "hq"]
    assert (m["positive_label"], m["negative_label"], m["lowercase"]) == ("hq", "cc", False)
    assert m["training"] == {
        "word_ngrams": 2,
        "dim": 16,
        "epoch": 5,
        "lr": 0.1,
        "min_count": 1,
        "seed": 0,
        "bucket": 20_000,
        "thread": 1,
        "loss": "softmax",
    }
    examples = m["examples"]
    assert examples["positive"]["read"] == 1728  # the TinyStories sample's parts
    assert examples["negative"]["read"] == 1500
    for cls in ("positive", "negative"):
        counts = examples[cls]
        assert counts["kept"] == counts["read"] - counts["empty"]
        assert counts["train"] + counts["validation"] == counts["kept"]
        assert 0.05 < counts["validation"] / counts["kept"] < 0.15  # validation_share 0.1
    assert [s["name"] for s in examples["sources"]] == ["tinystories", "junk"]
    assert examples["sources"][0]["input_sha256"] == (
        "5a19b936d7b53bbdac1eea03230b00161dceca24ae272f5bd8e9dbbc2a883418"  # data/README.md
    )
    assert re.fullmatch("[0-9a-f]{64}", examples["train_sha256"])
    histogram = m["validation"]["histogram"]
    assert histogram["bins"] == 20
    for cls, label in (("positive", "hq"), ("negative", "cc")):
        assert len(histogram[label]) == 20
        assert sum(histogram[label]) == examples[cls]["validation"]
        assert m["validation"]["examples"][label] == examples[cls]["validation"]
    assert m["code_version"].startswith("corpus_assets ")


def test_a_trained_classifier_is_kept_and_a_damaged_one_trained_again(
    trained: tuple[Path, TrainResult, TrainResult],
) -> None:
    config, first, _ = trained
    root = first.folder.parents[1]
    junk = config.parent / "junk.jsonl"
    junk.rename(junk.with_suffix(".away"))  # a trained classifier needs its sources no more
    lines: list[str] = []
    again = _train(config, root, lines)
    junk.with_suffix(".away").rename(junk)
    assert again.cached and again.model_sha256 == first.model_sha256
    assert any("already trained" in line for line in lines)
    assert not any(line.startswith("fetch") for line in lines)  # nothing fetched or read
    model = first.folder / "model.bin"
    model.write_bytes(model.read_bytes()[:-1] + b"\0")
    redone = _train(config, root)
    assert not redone.cached and redone.model_sha256 == first.model_sha256
    assert file_sha256(model) == first.model_sha256


def test_examples_are_chosen_by_hash_not_by_their_order(
    tmp_path: Path, write_config: WriteConfig
) -> None:
    """With max_examples below a class's size, the kept documents are those with the smallest
    hash of (seed, source, id): the same when the file lists them in another order."""
    junk = write_junk(tmp_path / "listed" / "junk.jsonl", 400)
    lines = junk.read_text(encoding="utf-8").splitlines(keepends=True)
    reversed_junk = tmp_path / "reversed" / "junk.jsonl"
    reversed_junk.parent.mkdir()
    reversed_junk.write_text("".join(reversed(lines)), encoding="utf-8")
    results = []
    for name, path in (("a", junk), ("b", reversed_junk)):
        config = stories_vs_junk(tmp_path, 1, max_examples=150, negative=[junk_source(path)])
        results.append(_train(write_config(tmp_path / f"{name}.toml", config), tmp_path / name))
    first, second = (r.manifest["examples"] for r in results)
    assert first["negative"]["kept"] == first["positive"]["kept"] == 150
    assert first["train_sha256"] == second["train_sha256"]
    assert first["validation_sha256"] == second["validation_sha256"]
    assert results[0].model_sha256 == results[1].model_sha256


def test_a_corpus_build_s_shards_are_a_source(tmp_path: Path, write_config: WriteConfig) -> None:
    root = tmp_path / "root"
    for stage in ("fetch", "shard"):
        built = run_stage(stage, REPO / "examples" / "tiny.toml", root, workers=1)
    key = built["partition_key"]
    config = stories_vs_junk(tmp_path, junk=300)
    config["positive"] = [{"name": "tiny", "shards": key}]
    result = _train(write_config(tmp_path / "c.toml", config), root)
    shards = json.loads((root / built["manifest"]).read_text(encoding="utf-8"))
    source = result.manifest["examples"]["sources"][0]
    assert source["shards"] == key and source["documents"] == shards["documents_out"]
    assert source["manifest_sha256"] == file_sha256(root / built["manifest"])
    assert result.manifest["validation"]["roc_auc"] > 0.9


def test_a_shards_source_that_is_not_built_is_one_line(
    tmp_path: Path, write_config: WriteConfig
) -> None:
    config = stories_vs_junk(tmp_path, junk=50)
    config["negative"] = [{"name": "web", "shards": "web-v1-0123456789ab"}]
    cfg = load_classifier_config(write_config(tmp_path / "c.toml", config))
    with pytest.raises(UpstreamMissing) as caught:
        train(cfg, Layout(tmp_path / "root"), Progress("classifier", silent))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("materialize shards first: source 'web': corpus build ")
    assert "web-v1-0123456789ab is not built under" in message
    assert not (tmp_path / "root" / "classifiers").exists()


def test_a_class_without_a_document_is_one_line(tmp_path: Path, write_config: WriteConfig) -> None:
    blank = tmp_path / "blank.jsonl"
    blank.write_text(
        "".join(json.dumps({"id": f"b{i}", "text": " \n\t "}) + "\n" for i in range(5)),
        encoding="utf-8",
    )
    config = stories_vs_junk(tmp_path, junk=50, negative=[junk_source(blank, "blank")])
    cfg = load_classifier_config(write_config(tmp_path / "c.toml", config))
    with pytest.raises(DataError, match=r"^negative source 'blank' holds no document with text$"):
        train(cfg, Layout(tmp_path / "root"), Progress("classifier", silent))
    assert not (tmp_path / "root" / "classifiers").exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"positive": []}, "no positive source; add at least one [[positive]] table"),
        ({"negative_label": "hq"}, "positive_label and negative_label are both 'hq'"),
        ({"validation_share": 1.0}, "validation_share: Input should be less than 1"),
        ({"validation_share": 0}, "validation_share: Input should be greater than 0"),
        ({"max_examples": 0}, "max_examples: Input should be greater than or equal to 1"),
        ({"training": {"epochs": 3}}, "unknown key 'epochs' in [training]; allowed: word_ngrams"),
        ({"positive_label": "a b"}, "positive_label: String should match pattern"),
        ({"name": "Stories"}, "name is not a path-safe name; allowed: lowercase letters"),
        (
            {"negative": [{"name": "web", "shards": "not-a-key"}]},
            "negative[0] (web).shards: 'not-a-key' is not a corpus partition key",
        ),
        (
            {"negative": [{"name": "tinystories", "shards": "web-v1-0123456789ab"}]},
            "source names must be unique across positive and negative; repeated: tinystories",
        ),
    ],
)
def test_bad_settings_are_one_line(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    config = {"name": "q", "positive": [stories_source()], "negative": [stories_source("x")]}
    with pytest.raises(ConfigError) as caught:
        validate_classifier({**config, **change}, tmp_path)
    assert "\n" not in str(caught.value)
    assert message in str(caught.value)


def _loaded(raw: dict[str, Any]) -> LoadedClassifierConfig:
    return validate_classifier(raw, REPO)


BASE: dict[str, Any] = {
    "name": "q",
    "positive": [stories_source()],
    "negative": [{"name": "web", "shards": "web-v1-0123456789ab"}],
}


def test_the_partition_key_is_the_name_and_the_content_hash(
    tmp_path: Path, write_config: WriteConfig
) -> None:
    cfg = _loaded(BASE)
    assert cfg.partition_key == f"q-{sha256_hex(canon(BASE))[:12]}"
    assert re.fullmatch(CLASSIFIER_KEY, cfg.partition_key)
    toml = load_classifier_config(write_config(tmp_path / "q.toml", BASE))
    as_json = load_classifier_config(write_config(tmp_path / "q.json", BASE))
    assert toml.partition_key == as_json.partition_key == cfg.partition_key
    assert CORPUS_KEY.pattern == PARTITION_KEY.pattern  # a shards source names a corpus key


SETTINGS = st.one_of(
    st.tuples(st.just("max_examples"), st.integers(1, 10**6)),
    st.tuples(st.just("validation_share"), st.floats(0.01, 0.99)),
    st.tuples(st.just("lowercase"), st.booleans()),
    st.tuples(st.just("positive_label"), st.from_regex(r"[a-z]{1,8}", fullmatch=True)),
    st.tuples(st.just("epoch"), st.integers(1, 100)),
    st.tuples(st.just("seed"), st.integers(0, 2**31 - 1)),
    st.tuples(st.just("dim"), st.integers(1, 1024)),
)


@settings(max_examples=100, deadline=None)
@given(setting=SETTINGS)
def test_a_changed_setting_gives_another_key(setting: tuple[str, Any]) -> None:
    """Any setting written (even to its default value) changes the config as written, so its
    hash: a key names one config exactly."""
    name, value = setting
    if name in ("epoch", "seed", "dim"):
        changed = {**BASE, "training": {name: value}}
    else:
        changed = {**BASE, name: value}
    if changed.get("positive_label") == "cc":
        changed["negative_label"] = "web"
    key = _loaded(changed).partition_key
    assert key != _loaded(BASE).partition_key
    assert re.fullmatch(CLASSIFIER_KEY, key) and key.startswith("q-")


@pytest.mark.parametrize(
    ("scores", "positive", "expected"),
    [
        ([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1], 1.0),
        ([0.9, 0.8, 0.2, 0.1], [0, 0, 1, 1], 0.0),
        ([0.5, 0.5, 0.5, 0.5], [0, 1, 0, 1], 0.5),
        ([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1], 0.75),
        ([0.3, 0.3, 0.7], [0, 1, 1], 0.75),  # a tie between classes counts one half
        ([0.3, 0.7], [1, 1], None),
    ],
)
def test_roc_auc_golden(scores: list[float], positive: list[int], expected: float | None) -> None:
    assert roc_auc(np.array(scores), np.array(positive, dtype=bool)) == expected


@settings(max_examples=200, deadline=None)
@given(
    pairs=st.lists(
        st.tuples(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]), st.booleans()), min_size=2
    )
)
def test_roc_auc_is_the_share_of_ordered_pairs(pairs: list[tuple[float, bool]]) -> None:
    """By ranks it equals the definition: of every (positive, negative) pair, the share where
    the positive scores higher, ties counting one half."""
    scores = np.array([s for s, _ in pairs])
    positive = np.array([p for _, p in pairs], dtype=bool)
    pos, neg = scores[positive], scores[~positive]
    auc = roc_auc(scores, positive)
    if not len(pos) or not len(neg):
        assert auc is None
        return
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    assert auc == pytest.approx(wins / (len(pos) * len(neg)))


def test_a_diverging_training_is_one_line(tmp_path: Path) -> None:
    """fastText's "Encountered NaN" (here from a huge lr, past what a config allows) comes back
    from the training process as a ConfigError that says what to lower."""
    rng = random.Random(0)
    lines = [f"__label__cc {classifier_text(junk_document(rng))}\n" for _ in range(200)]
    stories = STORIES.read_text(encoding="utf-8").split("<|endoftext|>")[:200]
    lines += [f"__label__hq {classifier_text(story)}\n" for story in stories]
    train_file = tmp_path / "train.txt"
    train_file.write_text("".join(lines), encoding="utf-8")
    settings = {"lr": 1e6, "epoch": 5, "dim": 16, "bucket": 1000, "thread": 1, "verbose": 0}
    with pytest.raises(ConfigError) as caught:
        fit(settings, str(train_file), str(tmp_path / "model.bin"), silent)
    assert str(caught.value) == (
        "fastText training diverged (Encountered NaN.); "
        "lower [training] lr (now 1000000.0) or epoch"
    )
