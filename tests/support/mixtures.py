"""Token builds written directly (no tokenizer): shards with ids and `.bin`/`.idx` pairs that
`corpus verify` accepts, for mixture tests and bench_mixture."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

EOS = 0
VOCAB = 50_257


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_build(
    folder: Path,
    name: str,
    shards: int,
    docs_per_shard: int,
    mean_tokens: int = 60,
    seed: int = 0,
) -> Path:
    """A token build `folder/tokens/<name>` with its shards in `folder/shards/<name>`; each
    document's tokens are `tag, k, k+1, ...` so a sample's origin can be checked by its ids.
    Returns the token build's folder."""
    rng = np.random.default_rng(seed)
    tokens_dir = folder / "tokens" / name
    shards_dir = folder / "shards" / name
    tokens_dir.mkdir(parents=True)
    shards_dir.mkdir(parents=True)
    files: list[dict[str, Any]] = []
    shard_entries = []
    for s in range(shards):
        stem = f"shard-{s:05d}"
        ids = [f"{name}/{s}/{d}" for d in range(docs_per_shard)]
        pq.write_table(
            pa.table({"id": ids, "text": ["x"] * len(ids)}), shards_dir / f"{stem}.parquet"
        )
        lengths = rng.integers(1, 2 * mean_tokens, size=docs_per_shard)
        parts = []
        for d, n in enumerate(lengths):
            body = (np.arange(n, dtype=np.int64) + d * 7 + s * 13) % (VOCAB - 1) + 1
            parts.append(np.append(body, EOS))
        stream = np.concatenate(parts).astype("<u2")
        ends = np.cumsum(lengths + 1).astype("<u8")
        stream.tofile(tokens_dir / f"{stem}.bin")
        ends.tofile(tokens_dir / f"{stem}.idx")
        for ext in (".bin", ".idx"):
            path = tokens_dir / f"{stem}{ext}"
            files.append(
                {
                    "name": path.name,
                    "shard": f"{stem}.parquet",
                    "sha256": _sha(path),
                    "bytes": path.stat().st_size,
                    "tokens": len(stream),
                    "documents": docs_per_shard,
                }
            )
        pq_path = shards_dir / f"{stem}.parquet"
        shard_entries.append(
            {
                "name": pq_path.name,
                "rows": docs_per_shard,
                "sha256": _sha(pq_path),
                "bytes": pq_path.stat().st_size,
            }
        )
    shards_manifest = shards_dir / "_MANIFEST.json"
    shards_manifest.write_text(json.dumps({"kind": "shards", "shards": shard_entries}))
    bins = [f for f in files if f["name"].endswith(".bin")]
    manifest = {
        "kind": "tokens",
        "build_id": f"corpus/{name}/v1/000000000000",
        "tokenizer": {"id": "synthetic", "sha256": None},
        "vocab_size": VOCAB,
        "eos_id": EOS,
        "dtype": "uint16",
        "idx_dtype": "uint64",
        "byte_order": "little",
        "files": files,
        "totals": {
            "documents": sum(f["documents"] for f in bins),
            "tokens": sum(f["tokens"] for f in bins),
        },
        "shards_manifest": f"../../shards/{name}/_MANIFEST.json",
        "shards_manifest_sha256": _sha(shards_manifest),
    }
    (tokens_dir / "_MANIFEST.json").write_text(json.dumps(manifest, indent=1))
    return tokens_dir


def write_config(path: Path, components: list[dict[str, Any]], **top: Any) -> Path:
    """A mixture config as JSON (`top`: name, seq_len, seed, validation_share, ...)."""
    raw = {"name": "mix", "seq_len": 64, **top, "components": components}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(raw))
    return path
