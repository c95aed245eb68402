"""What a person sees in the UI after two builds, one healthy and one failed and cleaned up.

Headless Chromium on the running `corpus ui`: the shards page shows the build's config and its
report with the plot images decoded; the Partitions tab's Failed filter lists the failed
partition (its files gone) and not the healthy one; the healthy partition's checks read
Succeeded, none "Execution failed"; the checks re-run from the Launchpad (`corpus_recheck`, the
partition picked from its list), and the failed partition, which has no build, is refused in one
line; the failed build's run page says the stage's one sentence first.
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
from dagster_support import unlicensed, variant
from playwright.sync_api import Page
from support.dagster import DagsterDev
from support.waiting import wait_for
from test_e2e_ui import ARTIFACTS, CHROMIUM_ARGS, _chromium, _skip_community_modal

from corpus_assets.assets.checks import SHARDS_AUDITS
from corpus_assets.core.config import load_config
from corpus_assets.core.store.layout import Layout

# The report step's observation of the shards partition: the whole report, tokens included.
PLOTS = ["Document length before and after filtering", "Drops by filter reason", "Duplicates"]
PLOTS += ["PII by kind", "Tokens per document"]
CHECKS = list(SHARDS_AUDITS)  # every check on shards


def finished(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRun | None:
    run = instance.get_run_by_id(run_id)
    return run if run is not None and run.is_finished else None


def launch_recheck(page: Page, url: str, key: str) -> str:
    """Launch `corpus_recheck` from its Launchpad with `key` picked from the partition list;
    the run's id."""
    page.goto(f"{url}/locations/corpus_assets.definitions/jobs/corpus_recheck/playground")
    page.locator(".CodeMirror").wait_for()
    picker = page.get_by_role("combobox", name="Partition")
    picker.click()
    picker.fill(key)  # filters the list of registered partitions (it keeps the last one picked)
    page.get_by_text(key, exact=True).last.click()
    page.get_by_role("button", name="Launch Run").click()
    page.wait_for_url("**/runs/*")
    return page.url.rsplit("/", 1)[1].split("?")[0]


def first_error(page: Page, url: str, run_id: str) -> list[str]:
    """The run page's events at level ERROR (the Levels filter: only error), in order."""
    page.goto(f"{url}/runs/{run_id}")
    page.get_by_role("button", name="Levels").click()
    for level in ("debug", "info", "warning", "critical", "event"):
        item = page.get_by_role("menuitem").filter(has_text=level)
        if item.get_by_role("checkbox").is_checked():
            item.click()
    page.keyboard.press("Escape")
    rows = page.locator("[class*=LogsRowComponents_rowError] [class*=messageColumn]")
    rows.first.wait_for()
    return rows.all_inner_texts()


def _build(dagster_dev: DagsterDev, config: Path) -> dict[str, object]:
    done = dagster_dev.corpus("build", str(config), "--root", str(dagster_dev.root))
    return {"code": done.returncode, **json.loads(done.stdout)}


def _report_images(page: Page) -> list[tuple[str, int]]:
    """Open the `report` metadata's Markdown; each image's alt text and decoded width."""
    row = page.locator("tr", has=page.locator("td", has_text="report_path")).first
    row.wait_for()
    report = page.locator("tr", has=page.get_by_text("report", exact=True)).first
    report.get_by_text("[Show Markdown]").click()
    page.locator(f"img[alt='{PLOTS[-1]}']").wait_for()
    page.wait_for_function("() => Array.from(document.images).every(i => i.complete)")
    page.locator(f"img[alt='{PLOTS[1]}']").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "ui-shards-report.png"))
    images: list[tuple[str, int]] = page.evaluate(
        "() => Array.from(document.images).filter(i => i.src.startsWith('data:image/png'))"
        ".map(i => [i.alt, i.naturalWidth])"
    )
    page.keyboard.press("Escape")
    return images


@pytest.mark.timeout(600)
def test_report_failed_partition_checks_and_recheck_in_the_ui(dagster_dev: DagsterDev) -> None:
    from playwright.sync_api import sync_playwright

    healthy = variant(dagster_dev.example, "story-ok", version="story")
    failing = unlicensed(dagster_dev.example)
    ok, bad = load_config(healthy), load_config(failing)
    assert _build(dagster_dev, healthy)["code"] == 0
    assert _build(dagster_dev, failing)["code"] == 65  # `corpus build` cleans up after it
    layout = Layout(dagster_dev.root.resolve())
    assert not layout.shards(bad).exists()
    ARTIFACTS.mkdir(exist_ok=True)
    url = dagster_dev.url
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(60_000)
        try:
            # The shards page, the partition's detail (Partitions tab): the config of its
            # materialization and the report's plots (the report step's observation of the
            # partition), decoded by the browser.
            page.goto(f"{url}/assets/shards?view=partitions&partition={ok.partition_key}")
            page.get_by_text(ok.build_id).first.wait_for()
            _skip_community_modal(page)
            page.get_by_text('"license": "cc0-1.0"').first.wait_for()
            images = _report_images(page)
            assert [alt for alt, _ in images] == PLOTS
            assert all(width == 700 for _, width in images), images

            # Partitions: only the failed one under the Failed filter.
            page.goto(f"{url}/assets/shards?view=partitions")
            for status in ("Materialized", "Materializing", "Missing"):
                page.get_by_text(f"{status} (").first.click()
            page.get_by_text(bad.partition_key).first.wait_for()
            page.screenshot(path=str(ARTIFACTS / "ui-failed-partition.png"))
            assert page.get_by_text(ok.partition_key).count() == 0

            # Checks: the healthy partition's results, none "Execution failed".
            page.goto(f"{url}/assets/shards?view=checks")
            for name in CHECKS:
                page.get_by_text(name).first.wait_for()
            assert page.get_by_text("Succeeded").count() == len(CHECKS)
            assert page.get_by_text("Execution failed").count() == 0

            # Re-run the checks of the healthy partition: the partition picked in the Launchpad.
            run_id = launch_recheck(page, url, ok.partition_key)
            with dagster_dev.instance() as instance:
                run = wait_for(lambda: finished(instance, run_id), 180, "the recheck", every=1.0)
                assert run.status == dg.DagsterRunStatus.SUCCESS
                keys = [dg.AssetCheckKey(dg.AssetKey("shards"), n) for n in CHECKS]
                latest = instance.event_log_storage.get_latest_asset_check_execution_by_key(keys)
                assert {r.run_id for r in latest.values()} == {run_id}
            page.goto(f"{url}/assets/shards?view=checks")
            page.get_by_text(CHECKS[0]).first.wait_for()
            page.get_by_text("Succeeded").nth(len(CHECKS) - 1).wait_for()
            page.screenshot(path=str(ARTIFACTS / "ui-rechecked.png"))

            # The failed partition (cleaned up: no build) is refused in one line, never a green
            # run that checked nothing.
            refused = launch_recheck(page, url, bad.partition_key)
            with dagster_dev.instance() as instance:
                run = wait_for(lambda: finished(instance, refused), 180, "the refusal", every=1.0)
                assert run.status == dg.DagsterRunStatus.FAILURE
                failed_build = next(
                    r.run_id
                    for r in instance.get_runs(filters=dg.RunsFilter(job_name="corpus_build"))
                    if r.tags.get("dagster/partition") == bad.partition_key
                )
            assert first_error(page, url, refused) == [
                f"materialize shards first: partition {bad.partition_key} has no build to check"
            ]

            # The failed build's run page: its first ERROR is the stage's one sentence.
            sentence = first_error(page, url, failed_build)[0]
            assert sentence.startswith("source 'tiny' has license 'proprietary'"), sentence
            assert sentence.endswith("` exit 65 (bad data), not retried)"), sentence
            assert "\n" not in sentence and "Traceback" not in sentence
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / "ui-story-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
