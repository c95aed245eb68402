"""The code version recorded in manifests (changes when outputs may change)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    CODE_VERSION = f"corpus_assets {version('corpus_assets')}"
except PackageNotFoundError:  # running from a source tree without an install
    CODE_VERSION = "corpus_assets 0+unknown"
