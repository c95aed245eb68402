"""Run one stage by name: check the whole config first, then call the stage and summarize it."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

from corpus_assets.core.config import LoadedConfig, load_config
from corpus_assets.core.errors import ConfigError
from corpus_assets.core.stages.backend import LOCAL, Backend
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.progress import Emit, Progress, silent

StageFn = Callable[[LoadedConfig, Layout, int, Progress, Backend], dict[str, Any]]


def _fetch(
    cfg: LoadedConfig,
    layout: Layout,
    workers: int,
    progress: Progress,
    backend: Backend,
    refresh: bool = False,
) -> dict[str, Any]:
    from corpus_assets.core.stages.fetch import fetch

    result = fetch(cfg, layout, progress, refresh)
    return {"documents": result.documents, "sources": [asdict(s) for s in result.sources]}


def _shard(
    cfg: LoadedConfig, layout: Layout, workers: int, progress: Progress, backend: Backend
) -> dict[str, Any]:
    from corpus_assets.core.stages.shard import shard

    r = shard(cfg, layout, workers, progress, backend)
    return {
        "manifest": str(r.manifest.relative_to(layout.root)),
        "documents_in": r.docs_in,
        "documents_out": r.docs_out,
        "dropped": r.dropped,
        "duplicates": r.duplicates,
        "partial_copies": r.partial_copies,
        "pii": r.pii,
        "shards": r.shards,
        "text_bytes_out": r.bytes_out,
        "cached": r.cached,
        **({"contaminated": r.contaminated} if cfg.model.decontaminate else {}),
        **({"excluded": r.excluded} if cfg.model.exclude else {}),
    }


def _tokenize(
    cfg: LoadedConfig, layout: Layout, workers: int, progress: Progress, backend: Backend
) -> dict[str, Any]:
    from corpus_assets.core.stages.tokenize import tokenize

    return asdict(tokenize(cfg, layout, workers, progress, backend))


STAGES: dict[str, StageFn] = {"fetch": _fetch, "shard": _shard, "tokenize": _tokenize}


def run_stage(
    stage: str,
    config_path: Path,
    root: Path,
    workers: int | None = None,
    emit: Emit = silent,
    backend: Backend = LOCAL,
    refresh: bool = False,
) -> dict[str, Any]:
    """Run `stage` for the config at `config_path` under data root `root`; return its summary.

    `workers` and `backend` say where the stage's tasks run; they never change what is built.
    `refresh` (fetch only) asks each remote source's server whether it changed since it was
    fetched into the raw cache.
    """
    if stage not in STAGES:
        raise ConfigError(f"unknown stage {stage!r}; allowed: {', '.join(STAGES)}")
    if refresh and stage != "fetch":
        raise ConfigError(f"--refresh is an option of the fetch stage, not of {stage}")
    from corpus_assets.core.stages.preflight import preflight
    from corpus_assets.core.store.arrow import skip_pandas

    cfg = load_config(config_path)
    preflight(cfg)  # the whole config, before the stage touches the data root
    skip_pandas()  # no stage uses pandas: pyarrow's first list would import it (~0.15 s)
    layout = Layout(root.resolve())
    progress = Progress(stage, emit)
    run: StageFn = partial(_fetch, refresh=True) if refresh else STAGES[stage]
    summary = run(cfg, layout, workers or os.cpu_count() or 1, progress, backend)
    return {
        "stage": stage,
        "stage_key": cfg.stage_key(stage),
        "build_id": cfg.build_id,
        "partition_key": cfg.partition_key,
        **summary,
    }


def run_cleanup(
    config_path: Path, root: Path, emit: Emit = silent, keep_newer_than: float | None = None
) -> dict[str, Any]:
    """Clean up the build of the config at `config_path` (see `cleanup.cleanup`)."""
    from corpus_assets.core.stages.cleanup import cleanup

    cfg = load_config(config_path)
    cleaned = cleanup(cfg, Layout(root.resolve()), emit, keep_newer_than)
    return {
        "stage": "cleanup",
        "stage_key": cfg.stage_key("cleanup"),
        "build_id": cfg.build_id,
        "removed": [str(p) for p in cleaned.removed],
        **({"kept": cleaned.kept} if cleaned.kept else {}),
    }
