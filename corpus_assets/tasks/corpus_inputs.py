"""Corpus builds as task-job inputs: `inputs: [{corpus: <partition key>}]`.

A recipe may read a corpus build: the executor finds the partition's registered config under
the data root, verifies its shards against their manifest, and gives the recipe the shard
Parquet files (in manifest order) in `context.inputs`, after the job's own input files. The
manifest's sha256 joins the resume identity and the build id the snapshot's provenance.

The job reads a build under the build's shard lock, held shared (`reading`): the shard stage and
the cleanup take it exclusively, so a build is never replaced or removed while a job reads it.
Lock order, everywhere: the task partition's lock first (`attach.py`), then these, by hash12.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from corpus_assets.core.errors import ConfigError, DataError
from corpus_assets.core.store import registry
from corpus_assets.core.store.atomic import MANIFEST
from corpus_assets.core.store.digests import file_sha256
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.locks import build_lock
from corpus_assets.core.store.records import load_object


@dataclass(frozen=True)
class CorpusInput:
    """One verified corpus build a recipe reads."""

    partition_key: str
    build_id: str
    manifest: Path
    manifest_sha256: str
    shards: tuple[Path, ...]

    def provenance(self) -> dict[str, str]:
        return {
            "partition_key": self.partition_key,
            "build_id": self.build_id,
            "manifest_sha256": self.manifest_sha256,
        }


def check_registered(keys: list[str], root: Path | None) -> None:
    """Each key is a registered corpus config under `root` (its build may come later)."""
    if not keys:
        return
    if root is None:
        raise ConfigError("inputs name corpus builds; give the data root (--root)")
    for key in keys:
        registry.load(Layout(root), key)


@contextmanager
def reading(
    keys: list[str], root: Path | None, waiting: Callable[[str], None]
) -> Iterator[tuple[CorpusInput, ...]]:
    """The verified builds of `keys` (as `resolve`), each build's shard lock held shared until
    the block ends; `waiting` gets a line every few seconds while a stage holds one."""
    check_registered(keys, root)
    with ExitStack() as locks:
        if keys:
            assert root is not None
            layout = Layout(root)
            builds = {registry.load(layout, key).hash12: key for key in keys}
            for hash12 in sorted(builds):
                lock = layout.stage_lock(hash12, "shard")
                what = f"the shards of corpus input {builds[hash12]}"
                locks.enter_context(build_lock(lock, what, waiting, shared=True))
        yield resolve(keys, root)


def resolve(keys: list[str], root: Path | None) -> tuple[CorpusInput, ...]:
    """The verified shards builds of `keys` under `root`; a missing or broken one is named."""
    check_registered(keys, root)
    if not keys:
        return ()
    assert root is not None
    from corpus_assets.core.stages.shard_verify import verify_shards  # pyarrow: only when used

    layout = Layout(root)
    found = []
    for key in keys:
        folder = layout.shards(registry.load(layout, key))
        manifest = folder / MANIFEST
        if not manifest.is_file():
            raise DataError(
                f"corpus input {key}: no shards build at {folder}; materialize shards first"
            )
        problems = verify_shards(manifest)
        if problems:
            raise DataError(f"corpus input {key}: {manifest} does not verify: {problems[0]}")
        doc = load_object(manifest, "shards manifest")
        shards = tuple(folder / str(s["name"]) for s in doc["shards"])
        found.append(
            CorpusInput(key, str(doc["build_id"]), manifest, file_sha256(manifest), shards)
        )
    return tuple(found)
