"""`corpus classifier train CONFIG`: a real classifier trained, kept, and bad input refused."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from support.junk import junk_source, stories_vs_junk

from corpus_assets.core.classifier_config import CLASSIFIER_KEY
from corpus_assets.core.store.digests import file_sha256

CorpusRunner = Callable[..., subprocess.CompletedProcess[str]]
WriteConfig = Callable[[Path, Mapping[str, Any]], Path]


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The command's error: one line, the last on stderr, no traceback before it."""
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("corpus classifier: error: ")
    return last


def test_train_prints_the_key_the_model_and_its_scores_then_keeps_it(
    corpus: CorpusRunner, write_config: WriteConfig, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "stories.toml", stories_vs_junk(tmp_path, 600))
    root = tmp_path / "root"
    done = corpus("classifier", "train", config, "--root", root, check=True)
    lines = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in done.stdout.splitlines())
    key = lines["partition key"]
    assert re.fullmatch(CLASSIFIER_KEY, key) and key.startswith("stories-vs-junk-")
    folder = root / "classifiers" / key
    manifest = json.loads((folder / "MANIFEST.json").read_text(encoding="utf-8"))
    assert lines["model"] == str((folder / "model.bin").resolve())
    assert lines["model sha256"] == manifest["model"]["sha256"] == file_sha256(folder / "model.bin")
    shown = re.search(r"roc_auc (\d\.\d+)", lines["validation"])
    assert shown is not None
    auc = float(shown.group(1))
    assert auc == pytest.approx(manifest["validation"]["roc_auc"], abs=1e-4) and auc > 0.9
    assert "fetch: fetching source tinystories" in done.stderr
    assert "classifier: training on " in done.stderr

    again = corpus("classifier", "train", config, "--root", root, "--json", check=True)
    summary = json.loads(again.stdout)
    assert summary["already_trained"] is True
    assert summary["partition_key"] == key
    assert summary["model_sha256"] == manifest["model"]["sha256"]
    assert summary["validation"]["roc_auc"] == manifest["validation"]["roc_auc"]
    assert "already trained" in again.stderr and "fetching" not in again.stderr

    verified = corpus("verify", folder, check=True)
    assert verified.stdout.strip() == f"ok: {folder}"
    model = folder / "model.bin"
    model.write_bytes(model.read_bytes()[:-1] + b"\0")
    damaged = corpus("verify", folder / "MANIFEST.json")
    assert damaged.returncode == 65
    assert f"{model}: sha256 differs from the manifest" in damaged.stderr


@pytest.mark.parametrize(
    ("change", "code", "says"),
    [
        (
            {"negative": [{"name": "web", "shards": "web-v1-0123456789ab"}]},
            64,
            "materialize shards first: source 'web': corpus build web-v1-0123456789ab is not "
            "built under ",
        ),
        ({"negative_label": "hq"}, 64, "positive_label and negative_label are both 'hq'"),
        ({"training": {"threads": 4}}, 64, "unknown key 'threads' in [training]"),
        ({"negative": "blank"}, 65, "negative source 'blank' holds no document with text"),
        ({"negative": "missing"}, 64, "source 'missing': input not found: "),
    ],
)
def test_bad_input_is_one_line_and_nothing_is_published(
    corpus: CorpusRunner,
    write_config: WriteConfig,
    tmp_path: Path,
    change: dict[str, Any],
    code: int,
    says: str,
) -> None:
    config = stories_vs_junk(tmp_path, 50, **change)
    if config["negative"] == "blank":
        blank = tmp_path / "blank.jsonl"
        blank.write_text('{"id": "a", "text": "  "}\n{"id": "b", "text": "\\n"}\n')
        config["negative"] = [junk_source(blank, "blank")]
    elif config["negative"] == "missing":
        config["negative"] = [junk_source(tmp_path / "nowhere.jsonl", "missing")]
    root = tmp_path / "root"
    done = corpus("classifier", "train", write_config(tmp_path / "c.toml", config), "--root", root)
    assert done.returncode == code, done.stderr
    assert says in _one_error_line(done)
    assert not list(root.glob("classifiers/*"))
    assert done.stdout == ""


def test_a_config_that_is_not_there_is_exit_64(corpus: CorpusRunner, tmp_path: Path) -> None:
    done = corpus("classifier", "train", tmp_path / "nope.toml", "--root", tmp_path / "root")
    assert done.returncode == 64
    assert "classifier config file not found: " in _one_error_line(done)
    assert not (tmp_path / "root").exists()  # refused before the data root is made
