"""The data root every stage reads and writes, as a resource (docs/storage.md)."""

from pathlib import Path

import dagster as dg
from pydantic import Field

from corpus_assets.core.store.layout import Layout, default_root


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
    """The data root: `root` when given, else the CLI's default (`layout.default_root`)."""
    return Path(root).resolve() if root else default_root().resolve()
