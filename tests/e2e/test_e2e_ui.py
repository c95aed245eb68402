"""The Materialize button: headless Chromium drives the Dagster UI to build a partition."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pytest
from dagster_support import REPO, variant
from playwright.sync_api import Locator, Page
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from support.dagster import DagsterDev
from support.environment import unavailable
from support.waiting import wait_for

from corpus_assets.core.config import load_config
from corpus_assets.core.stages.verify import verify_path
from corpus_assets.core.store.layout import Layout

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = REPO / "test-artifacts"


def _chromium() -> str:
    if Path(CHROMIUM).is_file() or shutil.which("chromium"):
        return CHROMIUM if Path(CHROMIUM).is_file() else str(shutil.which("chromium"))
    unavailable("chromium is not installed (apt-get install chromium, or scripts/test-deps.sh)")


def _skip_community_modal(page: Page) -> None:
    """ "Join the Dagster community" covers the page a moment after a first visit: skip it."""
    skip = page.get_by_role("button", name="Skip")
    try:
        skip.wait_for(timeout=10_000)
    except PlaywrightTimeoutError:
        return
    skip.click()
    skip.wait_for(state="hidden")


def _pick_partition(page: Page, dialog: Locator, key: str) -> None:
    """Choose `key` in the dialog's partition picker (retried: the picker can close early)."""
    launch = dialog.get_by_role("button", name="Launch 1 run")
    title = dialog.get_by_text("Launch runs to materialize 4 assets")
    for attempt in range(3):
        try:
            dialog.get_by_text("Select a partition or create one").click(timeout=10_000)
            page.get_by_placeholder("Filter partitions").fill(key, timeout=10_000)
            page.locator("span", has_text=key).first.click(timeout=10_000)
            title.click()  # closes the picker
            launch.wait_for(timeout=10_000)
            return
        except PlaywrightTimeoutError:
            title.click()
            if launch.is_visible():
                return
            if attempt == 2:
                raise


@pytest.mark.timeout(600)
def test_materialize_button_builds_a_partition(dagster_dev: DagsterDev) -> None:
    from playwright.sync_api import sync_playwright

    executable = _chromium()
    config = variant(dagster_dev.example, "ui", version="ui")
    key = dagster_dev.register(config)
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(60_000)
            # the job's page: "Materialize all" means raw, shards, tokens and report, and the run
            # belongs to corpus_build (the README's path)
            page.goto(f"{dagster_dev.url}/locations/corpus_assets.definitions/jobs/corpus_build")
            materialize_all = page.get_by_role("button", name="Materialize all…")
            materialize_all.wait_for()
            _skip_community_modal(page)
            materialize_all.click()
            # quality_model, upstream of shards, has no materialization here (no classifier
            # trained): the UI asks first, naming it
            sure = page.get_by_role("dialog").filter(has_text="Are you sure?")
            sure.get_by_text("quality_model").wait_for()
            sure.get_by_role("button", name="Confirm").click()
            dialog = page.get_by_role("dialog")
            dialog.get_by_text("Launch runs to materialize 4 assets").wait_for()
            _pick_partition(page, dialog, key)
            dialog.get_by_role("button", name="Launch 1 run").click()
            page.get_by_role("link", name="View").first.wait_for()

            with dagster_dev.instance() as instance:

                def finished() -> dg.DagsterRun | None:
                    runs = [
                        r for r in instance.get_runs() if r.tags.get("dagster/partition") == key
                    ]
                    return runs[0] if runs and runs[0].is_finished else None

                run = wait_for(finished, 420, "the run launched from the UI", every=2.0)
            page.goto(f"{dagster_dev.url}/runs/{run.run_id}")
            page.get_by_text("Success").first.wait_for()
            page.screenshot(path=str(ARTIFACTS / "ui-materialize-run.png"), full_page=True)
            page.goto(f"{dagster_dev.url}/assets/tokens?view=partitions&partition={key}")
            page.get_by_role("link", name="corpus_build").first.wait_for()  # the job, not None
            page.screenshot(path=str(ARTIFACTS / "ui-materialize-tokens.png"), full_page=True)
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / "ui-failure.png"), full_page=True)
            raise
        finally:
            browser.close()

    assert run.status == dg.DagsterRunStatus.SUCCESS
    assert run.job_name == "corpus_build"  # partition pages say "Job: corpus_build"
    assert "SupersessionWarning" not in dagster_dev.log.read_text()  # `corpus ui` starts quietly
    layout = Layout(dagster_dev.root.resolve())
    cfg = load_config(config)
    assert verify_path(layout.shards(cfg)) == []
    assert verify_path(layout.tokens(cfg)) == []
    assert (layout.shards(cfg) / "REPORT.md").is_file()
    assert (ARTIFACTS / "ui-materialize-run.png").stat().st_size > 10_000
