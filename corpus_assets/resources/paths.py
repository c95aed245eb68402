"""The data root every stage reads and writes, as a resource (DESIGN §4)."""

import os
from pathlib import Path

import dagster as dg
from pydantic import Field

from corpus_assets.core.store.layout import DEFAULT_ROOT, Layout


class CorpusPaths(dg.ConfigurableResource["CorpusPaths"]):
    """Where the data root is; outputs of every partition live under it."""

    root: str | None = Field(
        default=None,
        description="data root; unset: $CORPUS_ROOT, else the folder above $DAGSTER_HOME when "
        "that is <root>/dagster or <root>/dagster-postgres, else ./corpus-data (read when a run "
        "starts, not at import)",
    )
    inbox: str | None = Field(
        default=None,
        description="folder the config sensor watches for new configs (default <root>/inbox)",
    )

    def root_path(self) -> Path:
        return resolve_root(self.root)

    def layout(self) -> Layout:
        return Layout(self.root_path())

    def inbox_path(self) -> Path:
        return Path(self.inbox).resolve() if self.inbox else self.root_path() / "inbox"


def resolve_root(root: str | None) -> Path:
    """The data root: explicit, `$CORPUS_ROOT`, `$DAGSTER_HOME/..` (if one of ours), default."""
    if root:
        return Path(root).resolve()
    if os.environ.get("CORPUS_ROOT"):
        return Path(os.environ["CORPUS_ROOT"]).resolve()
    home = os.environ.get("DAGSTER_HOME")
    if home and Path(home).name in ("dagster", "dagster-postgres"):
        return Path(home).resolve().parent
    return Path(DEFAULT_ROOT).resolve()
