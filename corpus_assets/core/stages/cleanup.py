"""Remove one build's outputs and staging; never the shared raw cache.

The cleanup takes the build's shard and tokenize locks (exclusive, in that order, the order
every holder of both uses), so it never deletes what a live stage of the same build is writing:
it waits for that stage to end. Given `keep_newer_than` (a Unix time: when a sensor or `corpus
build` decided to clean up after a failed run), it keeps a build whose manifest was published
after that instant: that build was made by a newer run, which the decision could not see.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from corpus_assets.core.config import LoadedConfig
from corpus_assets.core.store.atomic import MANIFEST, remove_tree
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.locks import build_lock
from corpus_assets.core.store.progress import Emit, silent


@dataclass(frozen=True)
class Cleaned:
    """What the cleanup removed (relative to the data root), or why it kept the build."""

    removed: list[Path]
    kept: str | None = None


def cleanup(
    cfg: LoadedConfig,
    layout: Layout,
    waiting: Emit = silent,
    keep_newer_than: float | None = None,
) -> Cleaned:
    """Delete shards, tokens and work folders of this config; idempotent."""
    with (
        build_lock(layout.stage_lock(cfg.hash12, "shard"), "the shard stage", waiting),
        build_lock(layout.stage_lock(cfg.hash12, "tokenize"), "the tokenize stage", waiting),
    ):
        if keep_newer_than is not None and (newer := published_after(cfg, layout, keep_newer_than)):
            return Cleaned(
                [],
                f"{newer.relative_to(layout.root)} was published after the cleanup "
                "was decided, by a newer build; kept",
            )
        targets = [layout.shards(cfg), layout.tokens(cfg), layout.work(cfg, "x").parent]
        removed = [t for t in targets if t.exists()]
        for target in removed:
            remove_tree(target)
        return Cleaned([t.relative_to(layout.root) for t in removed])


def published_after(cfg: LoadedConfig, layout: Layout, instant: float) -> Path | None:
    """The first manifest of the build (shards, then tokens) written after Unix time `instant`."""
    for folder in (layout.shards(cfg), layout.tokens(cfg)):
        try:
            if (folder / MANIFEST).stat().st_mtime > instant:
                return folder / MANIFEST
        except FileNotFoundError:
            continue
    return None
