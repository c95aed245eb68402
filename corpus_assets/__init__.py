"""corpus_assets: reproducible language-model training corpora as a Dagster asset graph."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corpus_assets.dataset import TokenDataset

__all__ = ["TokenDataset"]


def __getattr__(name: str) -> Any:
    """Import `TokenDataset` on first use, so the `corpus` CLI starts without numpy."""
    if name == "TokenDataset":
        from corpus_assets.dataset import TokenDataset

        return TokenDataset
    raise AttributeError(f"module 'corpus_assets' has no attribute {name!r}")
