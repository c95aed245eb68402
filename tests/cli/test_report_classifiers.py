"""`corpus report` of a build with quality classifiers (a `min_score` and a `keep_top` one): the
table and report.json numbers against the model's own scores, a score plot per classifier with
its cut drawn where the cut is; C4's removed lines beside the drop reasons; a build without
classifiers has no classifier section."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.classifier import built_classifier, documents, train
from support.corpus import run_corpus

from corpus_assets.core.stages.report_plots import MARGINS, ORANGE, quality_figure, quality_plots
from corpus_assets.core.text.quality import Scorer

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
HEAD = (
    'dataset = "t"\nversion = "v1"\ntokenizer = {id = "bytes"}\n'
    '[[sources]]\nname = "docs"\nkind = "jsonl"\npath = "in.jsonl"\nlicense = "mit"\n'
    '[licenses]\nallow = ["mit"]\n[dedup]\nnear = false\n'
)
KEY = "top-0123456789ab"
CLASSIFIERS = (
    '[[filters.classifiers]]\nname = "edu"\nmodel = "model.bin"\nlabel = "hq"\nmin_score = 0.2\n'
    f'[[filters.classifiers]]\nname = "top"\nmodel = "{KEY}"\nkeep_top = 0.5\n'
)
PLOTS = ["report_quality_edu.png", "report_quality_top.png"]


def build(folder: Path, texts: list[str], tables: str, root: Path | None = None) -> Path:
    """Fetch and shard a config over `texts` with `tables`, then report it: the shards folder."""
    lines = "".join(json.dumps({"text": t}) + "\n" for t in texts)
    (folder / "in.jsonl").write_text(lines, encoding="utf-8")
    cfg = folder / "c.toml"
    cfg.write_text(HEAD + tables, encoding="utf-8")
    root = root or folder / "root"
    run_corpus("run", "--stage", "fetch", "--config", cfg, "--root", root, environ=ENV, check=True)
    out = run_corpus(
        "run", "--stage", "shard", "--config", cfg, "--root", root, environ=ENV, check=True
    )
    shards = (root / json.loads(out.stdout)["manifest"]).parent
    run_corpus("report", shards, environ=ENV, check=True)
    return shards


def load(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def classified(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[float]]:
    """The shards folder of 300 documents scored by `edu` (min_score 0.2, a model file) and cut
    by `top` (keep_top 0.5, a trained classifier's key), reported; the model's scores."""
    folder = tmp_path_factory.mktemp("classified")
    texts = documents(300)
    model = train(folder)
    built_classifier(folder / "root", KEY, model)
    return build(folder, texts, CLASSIFIERS), Scorer(model, "hq").many(texts)


def test_the_classifier_numbers_are_the_cuts_the_model_makes(
    classified: tuple[Path, list[float]],
) -> None:
    shards, scores = classified
    numbers = load(shards / "report.json")
    edu, top = numbers["classifiers"]
    low = sum(s < 0.2 for s in scores)
    passed = sorted((s for s in scores if s >= 0.2), reverse=True)
    k = -(-len(passed) // 2)  # ceil(0.5 n)
    assert 0 < low < 300 and 0 < k < len(passed)
    assert {key: edu[key] for key in ("name", "model", "label", "rule", "min_score", "cut")} == {
        "name": "edu",
        "model": "model.bin",
        "label": "hq",
        "rule": "min_score",
        "min_score": 0.2,
        "cut": 0.2,
    }
    assert (edu["scored"], edu["kept"], edu["dropped"]) == (300, 300 - low, low)
    assert edu["realized_share"] == (300 - low) / 300
    assert edu["histogram"]["counts"] == np.histogram(scores, 20, (0.0, 1.0))[0].tolist()
    assert edu["histogram"]["edges"] == [i / 20 for i in range(21)]
    assert {key: top[key] for key in ("name", "model", "label", "rule", "keep_top")} == {
        "name": "top",
        "model": KEY,
        "label": "hq",  # the classifier manifest's positive_label
        "rule": "keep_top",
        "keep_top": 0.5,
    }
    assert top["cut"] == top["score_at_cut"] == passed[k - 1]
    assert (top["scored"], top["kept"], top["dropped"]) == (len(passed), k, len(passed) - k)
    assert top["realized_share"] == k / len(passed)
    assert top["histogram"]["counts"] == np.histogram(passed, 20, (0.0, 1.0))[0].tolist()
    manifest = load(shards / "_MANIFEST.json")
    assert (
        numbers["dropped"]
        == manifest["dropped"]
        == {
            "quality_edu": low,
            "quality_top": len(passed) - k,
        }
    )
    assert manifest["documents_out"] == k


def test_the_report_has_a_classifier_table_and_a_plot_for_each(
    classified: tuple[Path, list[float]],
) -> None:
    shards, _scores = classified
    edu, top = load(shards / "report.json")["classifiers"]
    text = (shards / "REPORT.md").read_text(encoding="utf-8")
    table = (
        "## Quality classifiers\n\n"
        "| classifier | model | label | cut | scored | kept | dropped | realized share |\n"
        "|---|---|---|---|---:|---:|---:|---:|\n"
        f"| edu | `model.bin` | hq | min_score 0.2 | 300 | {edu['kept']} | {edu['dropped']} "
        f"| {edu['realized_share']:.4f} |\n"
        f"| top | `{KEY}` | hq | keep_top 0.5: lowest kept {top['cut']:.4f} | {top['scored']} "
        f"| {top['kept']} | {top['dropped']} | {top['realized_share']:.4f} |\n"
    )
    assert table in text
    assert text.index("## Quality classifiers") < text.index("## Plots")
    for name, c in zip(PLOTS, (edu, top), strict=True):
        assert f"### Scores of classifier {c['name']}\n\n![Scores of classifier " in text
        assert f"]({name})" in text
    assert text.count("How to read this:") == 6  # four plots, two classifiers, no tokens build
    assert "reason `quality_edu`" in text and "the lowest score kept" in text


@pytest.mark.parametrize("which", [0, 1])
def test_each_plot_draws_the_cut_where_it_is(
    classified: tuple[Path, list[float]], which: int
) -> None:
    from matplotlib.colors import to_rgb
    from matplotlib.image import imread

    shards, _scores = classified
    numbers = load(shards / "report.json")
    entry = numbers["classifiers"][which]
    name = PLOTS[which]
    png = (shards / name).read_bytes()
    assert png == quality_plots(numbers)[name]  # the figure below is the file's
    fig = quality_figure(entry)
    fig.subplots_adjust(**MARGINS)  # as the PNG is saved
    fig.canvas.draw()
    (ax,) = fig.axes
    height = fig.canvas.get_width_height()[1]
    bottom, top = (height - ax.transAxes.transform((0, y))[1] for y in (0, 1))
    pixels = imread(str(shards / name))[int(top) : int(bottom), :, :3]
    orange = np.all(np.abs(pixels - np.array(to_rgb(ORANGE))) < 0.1, axis=2)

    def share(score: float) -> float:
        x = round(float(ax.transData.transform((score, 0))[0]))
        return float(orange[:, x - 1 : x + 2].any(axis=1).mean())

    assert share(entry["cut"]) > 0.4  # a dashed line down the plot
    assert share(entry["cut"] - 0.1) < 0.05 and share(entry["cut"] + 0.1) < 0.05
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == [f"{i / 10:.1f}" for i in range(11)]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[0] == f"scored ({entry['scored']:,})"
    assert legend[1].startswith(entry["rule"])


def test_a_build_without_classifiers_has_no_classifier_part_and_shows_removed_lines(
    tmp_path: Path,
) -> None:
    body = "The keeper climbed the stairs of the old lighthouse every evening at dusk.\n"
    texts = ["Menu\n" + body + "Share this page\n", body.replace("keeper", "warden") + "Home\n"]
    tables = "[filters]\nc4_terminal_punctuation = true\nmin_words = 5\n"
    shards = build(tmp_path, texts, tables)
    numbers = load(shards / "report.json")
    assert "classifiers" not in numbers
    assert numbers["lines_removed"] == {"no_terminal_punctuation": 3}
    assert not list(shards.glob("report_quality_*"))
    text = (shards / "REPORT.md").read_text(encoding="utf-8")
    assert "Quality classifiers" not in text and "Scores of classifier" not in text
    assert "| line removal reason | count |\n|---|---:|\n| no_terminal_punctuation | 3 |\n" in text
    assert text.count("How to read this:") == 4


def test_after_tokenize_the_classifier_plots_are_kept_and_the_report_is_current(
    classified: tuple[Path, list[float]], tmp_path: Path
) -> None:
    from corpus_assets.core.stages.report import current_report, write_report

    shards, _scores = classified
    root = tmp_path / "root"
    shutil.copytree(shards.parents[3], root)
    folder = root / shards.relative_to(shards.parents[3])
    drawn = {name: (folder / name).read_bytes() for name in PLOTS}
    manifest = folder / "_MANIFEST.json"
    assert current_report(manifest) == folder / "REPORT.md"
    (folder / PLOTS[0]).write_bytes(b"drawn by the shards step")  # reused, not drawn again
    cfg = shards.parents[4] / "c.toml"
    run_corpus(
        "run", "--stage", "tokenize", "--config", cfg, "--root", root, environ=ENV, check=True
    )
    done = write_report(manifest)
    assert (folder / PLOTS[0]).read_bytes() == b"drawn by the shards step"
    assert (folder / PLOTS[1]).read_bytes() == drawn[PLOTS[1]]
    assert [f.name for f in done.files][4:] == [
        *PLOTS,
        "report_tokens.png",
        "report.json",
        "REPORT.md",
    ]
    text = done.report.read_text(encoding="utf-8")
    assert text.count("How to read this:") == 7
    assert text.index("report_quality_top.png") < text.index("report_tokens.png")
    assert current_report(manifest) == done.report
    # a report.json of this manifest without its classifiers (an older report): not current
    numbers = load(folder / "report.json")
    del numbers["classifiers"]
    (folder / "report.json").write_text(json.dumps(numbers), encoding="utf-8")
    assert current_report(manifest) is None


def test_a_model_url_shows_no_secret_and_a_cut_that_kept_none_draws_no_line() -> None:
    from corpus_assets.core.stages.report_data import classifier_numbers
    from corpus_assets.core.stages.report_plots import cut_label

    entry = {
        "name": "web",
        "column": "quality_web",
        "model": "https://user:hunter2@models.example/m.bin?token=s3cret",
        "model_sha256": "0" * 64,
        "label": "hq",
        "lowercase": True,
        "keep_top": 0.1,
        "scored": 0,
        "dropped": 0,
        "kept": 0,
        "realized_share": None,
        "score_at_cut": None,
        "histogram": [0] * 20,
    }
    (numbers,) = classifier_numbers({"classifiers": [entry]})
    assert "hunter2" not in json.dumps(numbers) and "s3cret" not in json.dumps(numbers)
    assert numbers["model"].startswith("https://user:<sha256:")
    assert (numbers["rule"], numbers["cut"]) == ("keep_top", None)
    assert cut_label(numbers) == "keep_top 0.1: none kept"
    (ax,) = quality_figure(numbers).axes
    assert len(ax.lines) == 0  # the stairs are a patch; no cut line
