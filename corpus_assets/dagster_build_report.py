"""The build report on the asset pages: `corpus report`'s REPORT.md with its plots inlined.

Made in the run worker after the stage subprocess has exited and published its manifest, so no
stage is slower for it (the step is: about a second on 20 MB, see docs/benchmarks.md). The
shards step reports the build as sharded (with tokens per document when a tokens build of the
same config already exists); the tokens step completes it (the shards half, already drawn, is
reused: core/stages/report.py), so REPORT.md beside the shards always describes the latest
finished stage. The report is outside the manifests' digests
(core/stages/report.py says why). A report still current (made from the manifests as they are)
is shown again without drawing it, so a no-op rebuild costs two manifest hashes. A report that
cannot be made never fails the build: the materialization says why instead, and
`corpus report PATH` makes it later.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import dagster as dg

from corpus_assets.core.config import LoadedConfig
from corpus_assets.core.stages.report import current_report, write_report
from corpus_assets.core.stages.report_markdown import with_inline_images
from corpus_assets.core.stages.report_plots import private_config_dir, warm_up
from corpus_assets.core.store.atomic import MANIFEST
from corpus_assets.core.store.layout import Layout


def warm_up_report() -> None:
    """Import the plotting library on a daemon thread while the stage's subprocess runs (the
    run worker only waits for it then), so the report after the stage starts drawing at once."""

    private_config_dir()  # here, not on the thread: a thread must not change the environment

    def run() -> None:
        with contextlib.suppress(Exception):  # the report itself says what went wrong
            warm_up()

    threading.Thread(target=run, name="report-warm-up", daemon=True).start()


def report_metadata(
    context: dg.AssetExecutionContext, cfg: LoadedConfig, layout: Layout
) -> dict[str, dg.MetadataValue[Any]]:
    """Write the build's report; its Markdown (plots as data: URIs), path and time as metadata."""
    started = time.perf_counter()
    try:
        manifest = layout.shards(cfg) / MANIFEST
        report = current_report(manifest) or write_report(manifest).report
        text = with_inline_images(report.read_text(encoding="utf-8"), report.parent)
    except Exception as exc:  # the build stands without its report
        context.log.warning(f"no build report: {exc}")
        return {"report": dg.MetadataValue.text(f"not written: {exc}")}
    seconds = time.perf_counter() - started
    context.log.info(f"build report {report} ready in {seconds:.2f} s")
    return {
        "report": dg.MetadataValue.md(text),
        "report_path": dg.MetadataValue.path(str(report)),
        "report_seconds": dg.MetadataValue.float(round(seconds, 3)),
    }


def with_report(
    context: dg.AssetExecutionContext,
    result: dg.MaterializeResult[Any],
    cfg: LoadedConfig,
    layout: Layout,
) -> dg.MaterializeResult[Any]:
    """`result` with the build report's metadata added."""
    return dg.MaterializeResult(
        asset_key=result.asset_key,
        metadata={**(result.metadata or {}), **report_metadata(context, cfg, layout)},
        check_results=result.check_results,
        data_version=result.data_version,
        tags=result.tags,
    )
