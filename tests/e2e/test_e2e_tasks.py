"""Task configs through the running UI: a backfill of two task partitions by the daemon, the
Materialize button of `task_dataset` in headless Chromium, the cloze task set's link to the corpus
build it read, and the corpus export's column schema."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dagster as dg
import pytest
from dagster_support import REPO
from support.dagster import DagsterDev, finished_runs
from support.waiting import wait_for
from test_e2e_ui import ARTIFACTS, CHROMIUM_ARGS, _chromium, _skip_community_modal

from corpus_assets.tasks.snapshot import load_snapshot

EXAMPLES = REPO / "examples" / "tasks"


def task_configs(folder: Path) -> list[Path]:
    """The plain and the calibrated arithmetic examples (with its reports) in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "reports").exists():
        shutil.copytree(EXAMPLES / "reports", folder / "reports")
    return [
        Path(shutil.copy(EXAMPLES / name, folder))
        for name in ("arithmetic.yaml", "arithmetic-calibrated.yaml")
    ]


def snapshot_of(dagster_dev: DagsterDev, key: str) -> Path:
    return next((dagster_dev.root / "tasks").glob(f"*/{key[-12:]}/dataset"))


@pytest.mark.timeout(900)
def test_backfill_of_two_task_configs(dagster_dev: DagsterDev) -> None:
    keys = [dagster_dev.register(c) for c in task_configs(dagster_dev.root.parent / "tasks")]
    dagster_dev.backfill("task_build", keys)
    with dagster_dev.instance() as instance:
        runs = wait_for(lambda: finished_runs(instance, keys), 780, "two backfill runs", every=3.0)
        assert all(r.tags.get("dagster/backfill") for r in runs)
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs), runs
        assert set(keys) <= instance.get_materialized_partitions(dg.AssetKey("task_dataset"))
    for key in keys:
        load_snapshot(snapshot_of(dagster_dev, key))  # verifies


@pytest.mark.timeout(600)
def test_materialize_button_builds_a_task_partition(dagster_dev: DagsterDev) -> None:
    from playwright.sync_api import sync_playwright

    executable = _chromium()
    config = task_configs(dagster_dev.root.parent / "ui-tasks")[1]
    renamed = config.with_name("ui-calibrated.yaml")
    renamed.write_text(config.read_text().replace("name: arithmetic-calibrated", "name: ui-tasks"))
    key = dagster_dev.register(renamed)
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(60_000)
            page.goto(f"{dagster_dev.url}/locations/corpus_assets.definitions/jobs/task_build")
            materialize = page.get_by_role("button", name="Materialize…")
            materialize.wait_for()
            _skip_community_modal(page)
            materialize.click()
            dialog = page.get_by_role("dialog")
            dialog.get_by_text("Select a partition or create one").click()
            page.get_by_placeholder("Filter partitions").fill(key)
            page.locator("span", has_text=key).first.click()
            dialog.get_by_text("Launch runs to materialize").first.click()  # closes the picker
            dialog.get_by_role("button", name="Launch 1 run").click()
            page.get_by_role("link", name="View").first.wait_for()
            with dagster_dev.instance() as instance:
                runs = wait_for(
                    lambda: finished_runs(instance, [key]), 420, "the UI's run", every=2.0
                )
            page.goto(f"{dagster_dev.url}/runs/{runs[0].run_id}")
            page.get_by_text("Success").first.wait_for()
            page.screenshot(path=str(ARTIFACTS / "ui-materialize-task-run.png"), full_page=True)
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / "ui-task-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
    assert runs[0].status == dg.DagsterRunStatus.SUCCESS
    assert runs[0].job_name == "task_build"
    snapshot = load_snapshot(snapshot_of(dagster_dev, key))
    assert snapshot.manifest["rows"] == 64


@pytest.mark.timeout(600)
def test_cloze_names_its_corpus_build_and_the_export_its_columns(dagster_dev: DagsterDev) -> None:
    """The cloze task set's page names the corpus build it read and links to that partition of
    shards; the corpus export's page shows its column schema and sample rows."""
    from playwright.sync_api import sync_playwright

    built = dagster_dev.corpus("build", str(dagster_dev.example), "--root", str(dagster_dev.root))
    assert built.returncode == 0, built.stderr
    corpus_key = json.loads(built.stdout)["partition_key"]
    cloze = dagster_dev.corpus(
        "build", str(EXAMPLES / "cloze.yaml"), "--root", str(dagster_dev.root)
    )
    assert cloze.returncode == 0, cloze.stderr
    cloze_key = json.loads(cloze.stdout)["partition_key"]
    exported = dagster_dev.dagster(
        "asset", "materialize", "-m", "corpus_assets.definitions", "--select", "corpus_hf",
        "--partition", corpus_key, cwd=dagster_dev.root.parent,
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr[-3000:]
    url = dagster_dev.url
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(60_000)
        try:
            page.goto(f"{url}/assets/task_dataset?view=partitions&partition={cloze_key}")
            row = page.locator("tr", has=page.locator("td", has_text="corpus_builds")).first
            row.wait_for()
            _skip_community_modal(page)
            assert f"build corpus/tiny-stories/v1/{corpus_key[-12:]}" in row.inner_text()
            page.screenshot(path=str(ARTIFACTS / "ui-cloze-corpus-build.png"), full_page=True)
            row.get_by_role("link", name=corpus_key).click()
            page.wait_for_url(f"**/assets/shards?view=partitions&partition={corpus_key}")
            page.get_by_text(f"corpus/tiny-stories/v1/{corpus_key[-12:]}").first.wait_for()

            page.goto(f"{url}/assets/corpus_hf?view=partitions&partition={corpus_key}")
            schema = page.locator("tr", has=page.locator("td", has_text="dagster/column_schema"))
            schema.first.wait_for()
            for column in ("id", "text", "source", "license"):
                schema.first.get_by_text(column, exact=True).first.wait_for()
            schema.first.get_by_text("the filtered, PII-scrubbed text").wait_for()
            sample = page.locator("tr", has=page.get_by_text("sample", exact=True)).first
            assert sample.get_by_text("cc0-1.0").count() == 3  # three sample rows
            page.screenshot(path=str(ARTIFACTS / "ui-corpus-hf-schema.png"), full_page=True)
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / "ui-cloze-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
