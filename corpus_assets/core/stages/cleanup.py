"""Remove one build's outputs and staging; never the shared raw cache."""

from __future__ import annotations

from pathlib import Path

from corpus_assets.core.config import LoadedConfig
from corpus_assets.core.store.atomic import remove_tree
from corpus_assets.core.store.layout import Layout


def cleanup(cfg: LoadedConfig, layout: Layout) -> list[Path]:
    """Delete shards, tokens and work folders of this config; idempotent. Returns what went."""
    targets = [layout.shards(cfg), layout.tokens(cfg), layout.work(cfg, "x").parent]
    removed = [t for t in targets if t.exists()]
    for target in removed:
        remove_tree(target)
    return [t.relative_to(layout.root) for t in removed]
