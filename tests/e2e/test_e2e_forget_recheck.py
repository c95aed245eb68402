"""In headless Chromium: a config that can never build dropped from the UI ("Delete partitions")
and with `corpus forget`, each time leaving no failed assets on the Lineage page; the task checks
re-run from the `task_recheck` Launchpad; an export run from its own job names that job."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import dagster as dg
import pytest
from dagster_support import REPO, variant
from playwright.sync_api import Locator, Page
from support.dagster import DagsterDev
from support.waiting import wait_for
from test_e2e_story import finished
from test_e2e_ui import ARTIFACTS, CHROMIUM_ARGS, _chromium, _skip_community_modal

from corpus_assets.core.config import load_config
from corpus_assets.instance.forget import BUILD_ASSETS
from corpus_assets.resources.partitions import CORPUS_CONFIGS, corpus_configs
from corpus_assets.tasks import audit

TASK_EXAMPLES = REPO / "examples" / "tasks"
FAILED = dg.AssetPartitionStatus.FAILED


def _never_builds(example: Path, name: str) -> Path:
    """The example under a license not on the allow-list: its shard stage always refuses it."""
    raw = tomllib.loads(example.read_text(encoding="utf-8"))
    source = {**raw["sources"][0], "license": "proprietary"}
    return variant(example, name, version=name, sources=[source])


def _failed_keys(instance: dg.DagsterInstance) -> set[str]:
    keys = instance.get_dynamic_partitions(CORPUS_CONFIGS)
    failed: set[str] = set()
    for asset in ("raw", *BUILD_ASSETS):
        status = instance.get_status_by_partition(dg.AssetKey(asset), keys, corpus_configs)
        failed |= {key for key, value in (status or {}).items() if value == FAILED}
    return failed


def _corpus_group_tags(page: Page, url: str) -> list[tuple[str, str]]:
    """The Lineage page's corpus group: each status tag's colour and count; a red one is
    failed assets (its tooltip: "3 failed assets"), a green one materialized assets."""
    page.goto(f"{url}/asset-groups")
    group = page.locator(
        "div[class*=collapsedGroupNodeContainer]", has=page.locator("div[data-tooltip=corpus]")
    )
    tags = group.locator("div.BaseTag")
    tags.first.wait_for()
    found = []
    for n in range(tags.count()):
        style = tags.nth(n).get_attribute("style") or ""
        colour = style.split("--tag-fill-color: var(--color-background-", 1)[-1].split(")")[0]
        found.append((colour, tags.nth(n).inner_text().strip()))
    return found


def _has_failed(tags: list[tuple[str, str]]) -> bool:
    return any(colour == "red" for colour, _ in tags)


def _delete_in_the_ui(page: Page, url: str, key: str) -> None:
    """Assets → shards → the menu beside "Materialize…" → "Delete partitions", pick `key`."""
    page.goto(f"{url}/assets/shards")
    page.get_by_role("button", name="Materialize…").wait_for()
    page.locator("button:right-of(:text('Materialize…'))").first.click()
    page.get_by_role("menuitem", name="Delete partitions").click()
    dialog: Locator = page.locator(".dagster-dialog").filter(has_text="Delete corpus_configs")
    dialog.get_by_text("Select a partition").click()
    page.get_by_placeholder("Filter partitions").fill(key)
    page.locator("span", has_text=key).first.click()
    dialog.get_by_text("Select partition keys of the").click()  # closes the picker
    dialog.get_by_role("button", name="Delete 1 partition").click()
    dialog.get_by_role("button", name="Done").click()


def _build_fails(dagster_dev: DagsterDev, config: Path) -> str:
    done = dagster_dev.corpus("build", str(config), "--root", str(dagster_dev.root))
    assert done.returncode == 65, done.stderr[-2000:]
    return load_config(config).partition_key


@pytest.mark.timeout(600)
def test_a_dropped_bad_config_leaves_no_failed_assets_on_the_lineage_page(
    dagster_dev: DagsterDev,
) -> None:
    from playwright.sync_api import sync_playwright

    url = dagster_dev.url
    with dagster_dev.instance() as instance:  # what earlier tests left failed goes first
        for key in sorted(_failed_keys(instance)):
            assert (
                dagster_dev.corpus("forget", key, "--root", str(dagster_dev.root)).returncode == 0
            )
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(60_000)
        try:
            page.goto(f"{url}/asset-groups")
            _skip_community_modal(page)
            assert not _has_failed(_corpus_group_tags(page, url))

            # Dropped from the UI: Dagster's own "Delete partitions" of the shards page.
            in_ui = _build_fails(dagster_dev, _never_builds(dagster_dev.example, "ui-drop"))
            assert ("red", "3") in _corpus_group_tags(page, url)  # shards, tokens, report
            page.screenshot(path=str(ARTIFACTS / "ui-lineage-failed.png"))
            _delete_in_the_ui(page, url, in_ui)
            assert not _has_failed(_corpus_group_tags(page, url))

            # Dropped with `corpus forget KEY --data`, one JSON line.
            by_cli = _build_fails(dagster_dev, _never_builds(dagster_dev.example, "cli-drop"))
            assert ("red", "3") in _corpus_group_tags(page, url)
            done = dagster_dev.corpus("forget", by_cli, "--data", "--root", str(dagster_dev.root))
            assert done.returncode == 0 and len(done.stdout.splitlines()) == 1, done.stderr
            assert not _has_failed(_corpus_group_tags(page, url))
            page.screenshot(path=str(ARTIFACTS / "ui-lineage-forgotten.png"))
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / "ui-forget-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
    with dagster_dev.instance() as instance:
        left = instance.get_dynamic_partitions(CORPUS_CONFIGS)
        assert in_ui not in left and by_cli not in left


def _launch_task_recheck(page: Page, url: str, key: str) -> str:
    page.goto(f"{url}/locations/corpus_assets.definitions/jobs/task_recheck/playground")
    page.locator(".CodeMirror").wait_for()
    _skip_community_modal(page)
    picker = page.get_by_role("combobox", name="Partition")
    picker.click()
    picker.fill(key)
    page.get_by_text(key, exact=True).last.click()
    page.get_by_role("button", name="Launch Run").click()
    page.wait_for_url("**/runs/*")
    return page.url.rsplit("/", 1)[1].split("?")[0]


@pytest.mark.timeout(600)
def test_task_checks_run_again_from_the_launchpad(dagster_dev: DagsterDev) -> None:
    from playwright.sync_api import sync_playwright

    folder = dagster_dev.root.parent / "recheck-tasks"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(TASK_EXAMPLES / "reports", folder / "reports", dirs_exist_ok=True)
    text = (TASK_EXAMPLES / "arithmetic-calibrated.yaml").read_text(encoding="utf-8")
    config = folder / "recheck.yaml"
    config.write_text(text.replace("name: arithmetic-calibrated", "name: recheck-tasks"))
    built = dagster_dev.corpus("build", str(config), "--root", str(dagster_dev.root))
    assert built.returncode == 0, built.stderr[-2000:]
    key = json.loads(built.stdout)["partition_key"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(60_000)
        try:
            run_id = _launch_task_recheck(page, dagster_dev.url, key)
            with dagster_dev.instance() as instance:
                run = wait_for(lambda: finished(instance, run_id), 180, "the recheck", every=1.0)
                assert run.status == dg.DagsterRunStatus.SUCCESS
                assert run.job_name == "task_recheck"
                checks = [dg.AssetCheckKey(dg.AssetKey("task_dataset"), n) for n in audit.AUDITS]
                latest = instance.event_log_storage.get_latest_asset_check_execution_by_key(checks)
                assert {r.run_id for r in latest.values()} == {run_id}
            page.goto(f"{dagster_dev.url}/assets/task_dataset?view=checks")
            for name in audit.AUDITS:
                page.get_by_text(name).first.wait_for()
            page.get_by_text("Succeeded").nth(len(audit.AUDITS) - 1).wait_for()
            page.screenshot(path=str(ARTIFACTS / "ui-task-rechecked.png"))
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / "ui-task-recheck-failure.png"), full_page=True)
            raise
        finally:
            browser.close()


@pytest.mark.timeout(600)
def test_an_export_run_names_its_job(dagster_dev: DagsterDev) -> None:
    from playwright.sync_api import sync_playwright

    config = variant(dagster_dev.example, "export", version="export")
    built = dagster_dev.corpus("build", str(config), "--root", str(dagster_dev.root))
    assert built.returncode == 0, built.stderr[-2000:]
    key = load_config(config).partition_key
    url = dagster_dev.url
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(60_000)
        try:
            page.goto(f"{url}/locations/corpus_assets.definitions/jobs/corpus_export")
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

                def export_run() -> list[dg.DagsterRun]:
                    runs = instance.get_runs(dg.RunsFilter(job_name="corpus_export"))
                    return [r for r in runs if r.is_finished and r.tags["dagster/partition"] == key]

                run = wait_for(export_run, 300, "the export run", every=2.0)[0]
            assert run.status == dg.DagsterRunStatus.SUCCESS
            page.goto(f"{url}/runs/{run.run_id}")
            page.get_by_text("Success").first.wait_for()
            page.get_by_role("link", name="corpus_export").first.wait_for()  # the job, not None
            page.goto(f"{url}/assets/corpus_hf?view=partitions&partition={key}")
            page.get_by_role("link", name="corpus_export").first.wait_for()
            page.screenshot(path=str(ARTIFACTS / "ui-export-run-job.png"), full_page=True)
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / "ui-export-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
    assert (dagster_dev.root / "exports" / "corpus" / key / "corpus_source.json").is_file()
