"""Generation shards: a batch generated in parallel ranges, one file per range.

A recipe with `generation_shards` and `generate_shard` hooks has its batch planned as contiguous
ranges of its `generate` stream. A worker generates and cleans one range and writes it to
`work/generation-B-S.tsv` (one line per generated sample: the cleaned candidate's fields joined
by tabs, or `null` when `clean` rejected it), then a JSON sidecar `generation-B-S.json` with
the range, the row count and the file's sha256, both owner-only and crash-safe. The coordinator
imports the rows in shard order, so deduplication and the pool are what serial generation gives.
A shard file whose sidecar matches is reused on resume, even when its rows were never committed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from corpus_assets.core.errors import CorpusError
from corpus_assets.tasks.cleaned import Cleaned, canonical
from corpus_assets.tasks.files import private_writer, write_private_json
from corpus_assets.tasks.types import GenerationShard

HOOKS = ("generation_shards", "generate_shard")
REJECTED = b"null\n"
WRITE_LINES = 256  # lines written and hashed as one block
READ_BYTES = 1 << 18  # about this much of a shard file is read and parsed at a time


def row_line(row: Cleaned | None) -> bytes:
    """A shard file's line: `null`, or the task id as JSON text, the public task's, the
    reference's and the metadata's texts and the two digests in hex, joined by tabs.

    The texts are canonical JSON, which escapes every control character, and the digests are
    hex: no field holds a tab or a newline.
    """
    if row is None:
        return REJECTED
    task_id, public, reference, metadata, content_sha, input_sha = row
    return (
        f"{canonical(task_id)}\t{public}\t{reference}\t{metadata}\t{content_sha.hex()}\t"
        f"{input_sha.hex()}\n"
    ).encode()


def parse_row(line: bytes) -> Cleaned | None:
    """The row `row_line` wrote."""
    if line == REJECTED:
        return None
    text_id, public, reference, metadata, content_sha, input_sha = line.decode().split("\t")
    plain = text_id[:1] == '"' and "\\" not in text_id  # a string without escapes: no decoding
    return Cleaned(
        text_id[1:-1] if plain else json.loads(text_id),
        public,
        reference,
        metadata,
        bytes.fromhex(content_sha),
        bytes.fromhex(input_sha[:-1]),
    )


def _write_lines(fh: IO[bytes], sha: Any, lines: list[bytes]) -> int:
    """Write and hash the lines as one block, empty the list; how many there were."""
    block = b"".join(lines)
    fh.write(block)
    sha.update(block)
    count = len(lines)
    lines.clear()
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
        return self.folder / f"generation-{self.batch}-{self.index}.tsv"

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
                lines: list[bytes] = []
                for row in _passing_errors(rows):
                    lines.append(row_line(row))
                    if len(lines) == WRITE_LINES:
                        count += _write_lines(fh, sha, lines)
                count += _write_lines(fh, sha, lines)
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
        if not isinstance(rows, int) or data.count(b"\n") != rows:
            return None
        return rows

    def read(self, skip: int = 0) -> Iterator[Cleaned | None]:
        """The rows after the first `skip`, read about READ_BYTES at a time."""
        with self.rows_path.open("rb") as fh:
            while lines := fh.readlines(READ_BYTES):
                if skip >= len(lines):
                    skip -= len(lines)
                    continue
                yield from map(parse_row, lines[skip:])
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
