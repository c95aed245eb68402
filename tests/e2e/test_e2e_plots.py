"""The Plots tab of `shards` after two builds: each count, size and ratio is a chart.

Headless Chromium on the running `corpus ui`: two builds of two configs (the second keeps fewer
documents), then Assets → `shards` → Overview → Metadata → Plots. Dagster draws a chart per
numeric metadata key over the asset's materializations; a text value gets none.
"""

from __future__ import annotations

import json

import dagster as dg
import pytest
from dagster_support import variant
from support.dagster import DagsterDev
from test_e2e_ui import ARTIFACTS, CHROMIUM_ARGS, _chromium, _skip_community_modal

from corpus_assets.core.config import load_config

CHARTED = ["dagster/row_count", "documents_in", "dropped", "text_bytes_out", "files_bytes"]
CHARTED += ["dedup_removed_share", "duplicates_exact", "partial_copies"]


@pytest.mark.timeout(600)
def test_the_plots_tab_of_shards_charts_two_builds(dagster_dev: DagsterDev) -> None:
    from playwright.sync_api import sync_playwright

    loose = variant(dagster_dev.example, "plots-loose", version="plots-loose")
    strict = variant(
        dagster_dev.example, "plots-strict", version="plots-strict", filters={"min_words": 75}
    )
    kept = {}
    for config in (loose, strict):
        done = dagster_dev.corpus("build", str(config), "--root", str(dagster_dev.root))
        assert done.returncode == 0, done.stderr
        kept[load_config(config).partition_key] = json.loads(done.stdout)["documents"]["out"]
    assert kept[load_config(strict).partition_key] < kept[load_config(loose).partition_key]
    with dagster_dev.instance() as instance:
        shown = instance.fetch_materializations(dg.AssetKey("shards"), limit=2).records
        assert {r.partition_key for r in shown} == set(kept)

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(60_000)
        try:
            page.goto(f"{dagster_dev.url}/assets/shards")
            _skip_community_modal(page)
            page.get_by_role("button", name="Plots").click()
            for key in CHARTED:
                page.get_by_text(key, exact=True).first.wait_for()
            assert page.get_by_text("build_id", exact=True).count() == 0  # text: no chart
            page.get_by_text(CHARTED[0], exact=True).first.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "ui-shards-plots.png"), full_page=True)
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / "ui-plots-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
