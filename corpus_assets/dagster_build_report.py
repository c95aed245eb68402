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
from corpus_assets.core.stages.report_data import warm_lengths_before, warm_up_arrow
from corpus_assets.core.stages.report_markdown import with_inline_images
from corpus_assets.core.stages.report_plots import private_config_dir, warm_up
from corpus_assets.core.stages.shard import check_sources
from corpus_assets.core.store.atomic import MANIFEST
from corpus_assets.core.store.layout import Layout


def warm_up_report(cfg: LoadedConfig, layout: Layout, stage: str) -> threading.Thread:
    """Prepare the report on a daemon thread while the stage's subprocess runs (the run worker
    only waits for it then): import the plotting library, load pyarrow's compute kernels and,
    before the shard stage of an
    unpublished build, read the raw documents' lengths (the report's before-filtering
    histogram, which depends on the raw cache only). The report after the stage then draws at
    once; `report_metadata` waits for this thread first."""

    private_config_dir()  # here, not on the thread: a thread must not change the environment
    early = stage == "shard" and not (layout.shards(cfg) / MANIFEST).exists()

    def run() -> None:
        with contextlib.suppress(Exception):  # the report itself says what went wrong
            warm_up()
            warm_up_arrow()
            if early:
                warm_lengths_before(layout.root, check_sources(cfg, layout))

    thread = threading.Thread(target=run, name="report-warm-up", daemon=True)
    thread.start()
    return thread


def report_metadata(
    context: dg.AssetExecutionContext,
    cfg: LoadedConfig,
    layout: Layout,
    warming: threading.Thread | None = None,
) -> dict[str, dg.MetadataValue[Any]]:
    """Write the build's report; its Markdown (plots as data: URIs), path and time as metadata.
    `report_seconds` is the time after the stage: waiting for `warming`, then the report."""
    started = time.perf_counter()
    if warming is not None:
        warming.join()
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
    warming: threading.Thread | None = None,
) -> dg.MaterializeResult[Any]:
    """`result` with the build report's metadata added."""
    report = report_metadata(context, cfg, layout, warming)
    return dg.MaterializeResult(
        asset_key=result.asset_key,
        metadata={**(result.metadata or {}), **report},
        check_results=result.check_results,
        data_version=result.data_version,
        tags=result.tags,
    )
