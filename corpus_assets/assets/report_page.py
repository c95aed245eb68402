"""The build report on the asset pages: `corpus report`'s REPORT.md with its plots inlined.

Made by the `report` asset (assets/report.py), a step of its own after `tokens`: no stage step
draws anything, so the report slows no stage (docs/benchmarks.md measures its own step). It
reports the build as it stands (with tokens per document when the tokens build exists). The
report is outside the manifests' digests (core/stages/report.py says why). A report still
current (made from the manifests as they are) is shown again without drawing it, so a no-op
rebuild costs two manifest hashes. A report that cannot be made never fails the build: the
metadata says why instead, and `corpus report PATH` makes it later.
"""

from __future__ import annotations

import time
from typing import Any

import dagster as dg

from corpus_assets.core.config import LoadedConfig
from corpus_assets.core.stages.report import current_report, write_report
from corpus_assets.core.stages.report_markdown import with_inline_images
from corpus_assets.core.stages.report_plots import private_config_dir
from corpus_assets.core.store.atomic import MANIFEST
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.locks import build_lock


def report_metadata(
    context: dg.AssetExecutionContext | dg.OpExecutionContext,
    cfg: LoadedConfig,
    layout: Layout,
) -> dict[str, dg.MetadataValue[Any]]:
    """Write the build's report; its Markdown (plots as data: URIs), path and time as metadata."""
    started = time.perf_counter()
    private_config_dir()  # matplotlib's cache in a temporary folder, never the home directory
    try:
        manifest = layout.shards(cfg) / MANIFEST
        # one writer per build (a concurrent build's report step waits, then finds it current),
        # and the shards are read under their lock, shared: never while rebuilt or cleaned up
        with (
            build_lock(
                layout.stage_lock(cfg.hash12, "shard"), "the shards", context.log.info, True
            ),
            build_lock(layout.stage_lock(cfg.hash12, "report"), "the report", context.log.info),
        ):
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
