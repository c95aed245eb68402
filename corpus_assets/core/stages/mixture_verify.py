"""`corpus verify` for a mixture: its index files against the manifest, and every component's
token manifest still the one the mixture was built from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from corpus_assets.core.store.digests import verify_files
from corpus_assets.mixture import ComponentChanged, check_components, component_location
from corpus_assets.mixture import manifest_sha256 as build_manifest_sha256


def verify_mixture(path: Path, doc: dict[str, Any]) -> list[str]:
    """Problems of a mixture: index files missing or changed, components changed or gone."""
    folder = path.parent
    problems = verify_files(folder, doc.get("files", []))
    shas = {}
    for c in doc["components"]:
        location = component_location(str(folder), c["location"])
        try:
            shas[c["name"]] = build_manifest_sha256(location)
        except OSError:
            problems.append(
                f"{path}: component {c['name']!r}: no token build manifest at {location}"
            )
            shas[c["name"]] = c["manifest_sha256"]
    try:
        check_components(doc, folder, shas)
    except ComponentChanged as exc:
        problems.append(str(exc))
    return problems
