"""TEMPORARY stand-in (the helper's version replaces it at merge)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus_assets.core.config import canon, sha256_hex
from corpus_assets.core.errors import ConfigError, DataError
from corpus_assets.core.store.atomic import dump_json, fsync_dir
from corpus_assets.tasks.files import jsonl_line, private_dir, private_writer, write_private
from corpus_assets.tasks.types import PublicTask

DATA_FILES = ("public.jsonl", "references.jsonl", "train.jsonl", "probes.jsonl", "report.json")
MANIFEST = "manifest.json"


def dataset_id_of(d: Mapping[str, str]) -> str:
    return sha256_hex(canon({n: d[n] for n in DATA_FILES}))


def write_snapshot(
    staging: Path,
    final: Path,
    rows: Iterable[tuple[dict, dict, dict]],
    probes: Iterable[dict],
    report: Mapping[str, Any],
    provenance: Mapping[str, Any],
) -> dict[str, Any]:
    if final.exists():
        raise ConfigError(f"{final} exists")
    import shutil

    if staging.exists():
        shutil.rmtree(staging)
    private_dir(staging)
    files: dict[str, Any] = {}
    names = ("public.jsonl", "references.jsonl", "train.jsonl")
    hs = [hashlib.sha256() for _ in names]
    n = 0
    with (
        private_writer(staging / names[0]) as a,
        private_writer(staging / names[1]) as b,
        private_writer(staging / names[2]) as c,
    ):
        for row in rows:
            for fh, h, obj in zip((a, b, c), hs, row):
                line = jsonl_line(obj)
                fh.write(line)
                h.update(line)
            n += 1
    for name, h in zip(names, hs):
        files[name] = {"sha256": h.hexdigest(), "rows": n}
    pl = b"".join(jsonl_line(p) for p in probes)
    write_private(staging / "probes.jsonl", pl)
    files["probes.jsonl"] = {"sha256": hashlib.sha256(pl).hexdigest()}
    rep = dump_json(dict(report))
    write_private(staging / "report.json", rep)
    files["report.json"] = {"sha256": hashlib.sha256(rep).hexdigest()}
    did = dataset_id_of({k: v["sha256"] for k, v in files.items()})
    manifest = {"format": 1, "dataset_id": did, "rows": n, "files": files, **provenance}
    write_private(staging / MANIFEST, dump_json(manifest))
    os.replace(staging, final)
    fsync_dir(final.parent)
    return manifest


@dataclass(frozen=True)
class Snapshot:
    path: Path
    manifest: dict[str, Any]

    @property
    def dataset_id(self) -> str:
        return str(self.manifest["dataset_id"])

    def _rows(self, name: str) -> Iterator[dict[str, Any]]:
        with open(self.path / name, encoding="utf-8") as fh:
            for line in fh:
                yield json.loads(line)

    def training_rows(self) -> Iterator[dict[str, Any]]:
        return self._rows("train.jsonl")

    def public_tasks(self) -> Iterator[PublicTask]:
        for d in self._rows("public.jsonl"):
            yield PublicTask(d["task_id"], d["input"], d["metadata"])


def load_snapshot(path: str | Path) -> Snapshot:
    p = Path(path)
    if (p / "dataset").is_dir():
        p = p / "dataset"
    try:
        manifest = json.loads((p / MANIFEST).read_text())
    except OSError:
        raise DataError(f"no snapshot at {p}") from None
    return Snapshot(p, manifest)


def export_hf_dataset(snapshot: Snapshot | str | Path, dest: str | Path) -> Path:
    import datasets

    snap = snapshot if isinstance(snapshot, Snapshot) else load_snapshot(snapshot)
    d = Path(dest)
    datasets.Dataset.from_list(list(snap.training_rows())).save_to_disk(str(d))
    return d
