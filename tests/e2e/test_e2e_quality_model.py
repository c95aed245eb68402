"""A trained classifier in the Dagster UI (headless Chromium): the `quality_model` partition
shows its validation metrics, and `shards` shows `quality_model` upstream in its lineage."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster_support import REPO, copy_example
from playwright.sync_api import Page
from support.dagster import DagsterDev, running_ui
from support.junk import write_junk
from test_e2e_ui import ARTIFACTS, CHROMIUM_ARGS, _chromium, _skip_community_modal

from corpus_assets.definitions import build_defs
from corpus_assets.instance.home import ensure_home
from corpus_assets.jobs import CLASSIFIER_JOB
from corpus_assets.resources.paths import CorpusPaths

STORIES = REPO / "data" / "tinystories" / "TinyStoriesV2-GPT4-train.head10000lines.txt"


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DagsterDev]:
    """A `corpus ui` of its own: a trained classifier changes what the corpus pages ask."""
    base = tmp_path_factory.mktemp("e2e-quality")
    root = base / "data"
    home = ensure_home(root / "dagster")
    example = copy_example(base / "configs")
    env = {**os.environ, "DAGSTER_HOME": str(home), "CORPUS_ROOT": str(root)}
    with running_ui(base, root, home, env, example) as server:
        yield server


def classifier_config(folder: Path) -> Path:
    config = {
        "name": "stories-vs-junk",
        "positive": [
            {"name": "tinystories", "kind": "text", "path": str(STORIES),
             "separator": "<|endoftext|>", "license": "cdla-sharing-1.0"},
        ],
        "negative": [
            {"name": "junk", "kind": "jsonl", "path": str(write_junk(folder / "junk.jsonl", 300)),
             "license": "cc0-1.0"},
        ],
        "max_examples": 400,
        "training": {"dim": 16, "bucket": 20_000},
    }  # fmt: skip
    path = folder / "stories-vs-junk.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


@pytest.mark.timeout(600)
def test_the_ui_shows_a_trained_classifier_its_metrics_and_its_lineage(
    ui: DagsterDev, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    executable = _chromium()
    key = ui.register(classifier_config(tmp_path))
    job = build_defs(paths=CorpusPaths(root=str(ui.root))).resolve_job_def(CLASSIFIER_JOB)
    with ui.instance() as instance:
        result = job.execute_in_process(partition_key=key, instance=instance)
    assert result.success
    manifest = json.loads((ui.root / "classifiers" / key / "MANIFEST.json").read_text())
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        page: Page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(60_000)
        try:
            page.goto(f"{ui.url}/assets/quality_model?view=partitions&partition={key}")
            _skip_community_modal(page)
            page.get_by_text(manifest["model"]["sha256"]).first.wait_for()
            for name in ("precision", "recall", "roc_auc"):  # numbers, as the manifest has them
                row = page.locator("tr", has_text=f"validation_{name}").first.inner_text()
                assert float(row.split()[-1]) == manifest["validation"][name], row
            page.screenshot(path=str(ARTIFACTS / "ui-quality-model.png"), full_page=True)
            page.goto(f"{ui.url}/assets/shards?view=lineage&lineageScope=upstream&lineageDepth=1")
            page.get_by_text("quality_model").first.wait_for()  # the upstream of shards
            page.get_by_text("raw", exact=True).first.wait_for()
            page.screenshot(path=str(ARTIFACTS / "ui-quality-lineage.png"), full_page=True)
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / "ui-quality-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
