"""Generation shards: a batch generated in parallel ranges, one file per range.

A recipe with `generation_shards` and `generate_shard` hooks has its batch planned as contiguous
ranges of its `generate` stream. A worker generates and cleans one range and writes it to
`work/generation-B-S.rows` (the generated samples, cleaned, ready to admit: in `Block`s of
BLOCK_ROWS samples, each one `marshal` value after its length), then a JSON sidecar
`generation-B-S.json` with the range, the row count and the file's sha256, both owner-only and
crash-safe. The coordinator imports the rows in shard order, so deduplication and the pool are
what serial generation gives. A shard file whose sidecar matches is reused on resume, even when
its rows were never committed.
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from corpus_assets.core.errors import CorpusError
from corpus_assets.tasks.cleaned import Block, Cleaned
from corpus_assets.tasks.files import private_writer, write_private_json
from corpus_assets.tasks.types import GenerationShard

HOOKS = ("generation_shards", "generate_shard")
BLOCK_ROWS = 1024  # samples per block of a shard file: written, hashed and read back as one
_LENGTH = struct.Struct("<I")  # a block's byte length, before the block


def block_bytes(block: Block) -> bytes:
    """One block of a shard file: its length, then the block as one `marshal` value (lists of
    texts and byte strings), which the coordinator reads back with one C call per block
    instead of parsing each row."""
    data = block.to_marshal()
    return _LENGTH.pack(len(data)) + data


def read_blocks(fh: IO[bytes]) -> Iterator[Block]:
    """The blocks of a shard file, one read each; ValueError when the file does not end where
    a block does (cut short, or not a shard file)."""
    while head := fh.read(_LENGTH.size):
        (size,) = _LENGTH.unpack(head) if len(head) == _LENGTH.size else (-1,)
        data = fh.read(size) if size >= 0 else b""
        if size < 0 or len(data) != size:
            raise ValueError("a shard file block cut short")
        yield Block.from_marshal(data)


def _write_block(fh: IO[bytes], sha: Any, samples: list[Cleaned | None]) -> int:
    """Write and hash the samples as one block, empty the list; how many there were."""
    data = block_bytes(Block.of(samples))
    fh.write(data)
    sha.update(data)
    count = len(samples)
    samples.clear()
    return count


class ShardPlanError(CorpusError):
    """A recipe's `generation_shards` plan breaks the protocol (not retried)."""


class _RowsFailed(Exception):
    """Carries an error of a shard's rows through the file writer, which maps OSErrors."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _passing_errors(rows: Iterable[Cleaned | None]) -> Iterator[Cleaned | None]:
    try:
        yield from rows
    except Exception as exc:
        raise _RowsFailed(exc) from exc


@dataclass(frozen=True)
class ShardFile:
    """Where one shard of one batch lives: its rows and its sidecar."""

    folder: Path
    batch: int
    index: int
    shard: GenerationShard

    @property
    def rows_path(self) -> Path:
        return self.folder / f"generation-{self.batch}-{self.index}.rows"

    @property
    def sidecar_path(self) -> Path:
        return self.folder / f"generation-{self.batch}-{self.index}.json"

    def expected(self) -> dict[str, int]:
        return {
            "batch": self.batch,
            "shard": self.index,
            "start": self.shard.start,
            "stop": self.shard.stop,
        }

    def write(self, rows: Iterable[Cleaned | None]) -> int:
        """Write the rows, then the sidecar; the row count.

        An error of `rows` (the recipe's generating and cleaning) leaves as it was raised: an
        OSError of the recipe is not a failed write of the shard file.
        """
        sha, count = hashlib.sha256(), 0
        try:
            with private_writer(self.rows_path) as fh:
                block: list[Cleaned | None] = []
                for cleaned in _passing_errors(rows):
                    block.append(cleaned)
                    if len(block) == BLOCK_ROWS:
                        count += _write_block(fh, sha, block)
                if block:
                    count += _write_block(fh, sha, block)
        except _RowsFailed as failed:
            raise failed.error from None
        write_private_json(
            self.sidecar_path, self.expected() | {"rows": count, "sha256": sha.hexdigest()}
        )
        return count

    def verified_rows(self) -> int | None:
        """The row count when the sidecar matches this shard and its file, else None."""
        try:
            sidecar = json.loads(self.sidecar_path.read_bytes())
            data = self.rows_path.read_bytes()
        except (OSError, ValueError):
            return None
        if not isinstance(sidecar, dict) or {k: sidecar.get(k) for k in self.expected()} != (
            self.expected()
        ):
            return None
        rows = sidecar.get("rows")
        if sidecar.get("sha256") != hashlib.sha256(data).hexdigest():
            return None
        try:
            count = sum(block.size for block in read_blocks(io.BytesIO(data)))
        except (ValueError, EOFError, TypeError):
            return None
        if not isinstance(rows, int) or count != rows:
            return None
        return rows

    def read(self, skip: int = 0) -> Iterator[Block]:
        """The samples after the first `skip`, a block at a time."""
        with self.rows_path.open("rb") as fh:
            for block in read_blocks(fh):
                if skip >= block.size:
                    skip -= block.size
                    continue
                yield block.after(skip)
                skip = 0

    def remove(self) -> None:
        self.rows_path.unlink(missing_ok=True)
        self.sidecar_path.unlink(missing_ok=True)


def has_shard_hooks(recipe: object) -> bool:
    """Whether the recipe generates in shards (it has both hooks)."""
    return all(callable(getattr(recipe, hook, None)) for hook in HOOKS)


def checked_plan(
    shards: Iterable[object], shard_size: int, remaining: int
) -> tuple[list[GenerationShard], bool]:
    """The plan cut to the `remaining` samples max_candidates allows, and whether it was cut.

    Shards must be GenerationShards, contiguous from 0, each 1 to `shard_size` long.
    """
    plan: list[GenerationShard] = []
    truncated = False
    position = 0
    for index, shard in enumerate(shards):
        if not isinstance(shard, GenerationShard):
            raise ShardPlanError(
                f"generation_shards() yielded a {type(shard).__name__}; allowed: GenerationShard"
            )
        if shard.start != position or not 1 <= shard.stop - shard.start <= shard_size:
            raise ShardPlanError(
                f"generation_shards() shard {index} is {shard.start}..{shard.stop}; shards must "
                f"be contiguous from 0 (this one starting at {position}) and 1 to shard_size = "
                f"{shard_size} long"
            )
        position = shard.stop
        if truncated:
            continue
        if shard.stop > remaining:
            truncated = True
            if shard.start < remaining:
                plan.append(GenerationShard(shard.start, remaining))
            continue
        plan.append(shard)
    return plan, truncated
