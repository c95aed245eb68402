"""Task configs through the running UI: a backfill of two task partitions by the daemon, and the
Materialize button of `task_dataset` in headless Chromium."""

from __future__ import annotations

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
            page.goto(f"{dagster_dev.url}/assets/task_dataset")
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
    snapshot = load_snapshot(snapshot_of(dagster_dev, key))
    assert snapshot.manifest["rows"] == 64
