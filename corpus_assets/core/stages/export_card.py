"""The dataset card (`README.md`) of a corpus export: licenses, counts, config, build id."""

from __future__ import annotations

import json
from typing import Any


def dataset_card(manifest: dict[str, Any], source: dict[str, Any], licenses: dict[str, int]) -> str:
    """Markdown with a YAML header, from the shards manifest and what the export counted."""
    config = json.dumps(manifest.get("config"), indent=2, sort_keys=True, ensure_ascii=False)
    shard_bytes = sum(int(s["bytes"]) for s in manifest["shards"])
    lines = [
        "---",
        "license:",
        *(f"- {json.dumps(name, ensure_ascii=False)}" for name in licenses),
        f"pretty_name: {json.dumps(manifest['build_id'], ensure_ascii=False)}",
        "---",
        "",
        f"# {manifest['build_id']}",
        "",
        "Exported by `corpus export-hf` from a verified corpus build "
        "(load it with `datasets.load_from_disk`).",
        "",
        f"- build id: `{manifest['build_id']}`",
        f"- partition key: `{source.get('partition_key')}`",
        f"- config sha256: `{source.get('config_sha256')}`",
        f"- shards manifest sha256: `{source['manifest_sha256']}`",
        "",
        "## Counts",
        "",
        f"- documents: {source['rows']}",
        f"- shards: {len(manifest['shards'])}",
        f"- text bytes: {manifest['text_bytes_out']}",
        f"- shard file bytes: {shard_bytes}",
        "",
        "## Licenses",
        "",
        "| license | documents |",
        "|---|---|",
        *(f"| {name} | {count} |" for name, count in licenses.items()),
        "",
        "## Columns",
        "",
        "`id`, `text`, `source` (the config's source name), `license`.",
        "",
        "## Config",
        "",
        "As the shards manifest records it (the config as written, canonical JSON keys sorted):",
        "",
        "```json",
        config,
        "```",
        "",
    ]
    return "\n".join(lines)
