"""`work/batch-N-candidates.jsonl` and `work/batch-N-public.jsonl`: a generated batch's files,
derived from the checkpoints and written again wherever they are missing or differ."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

from corpus_assets.core.store.digests import file_sha256
from corpus_assets.tasks.checkpoints import Checkpoints
from corpus_assets.tasks.files import private_writer


def write_batch_files(work: Path, ckpt: Checkpoints, batch: int) -> list[Path]:
    """`work/batch-N-candidates.jsonl` (whole samples) and `-public.jsonl` (public tasks) of a
    generated batch, derived from the checkpoints: each one missing or with other bytes than
    the checkpoints give is written (again). Returns the files it wrote."""
    paths = (work / f"batch-{batch}-candidates.jsonl", work / f"batch-{batch}-public.jsonl")
    present = [path.is_file() for path in paths]
    stale = [path for path, there in zip(paths, present, strict=True) if not there]
    if any(present):
        wanted = [hashlib.sha256(), hashlib.sha256()]
        for blocks in _blocks(ckpt, batch):
            for digest, block in zip(wanted, blocks, strict=True):
                digest.update(block)
        stale += [
            path
            for path, there, digest in zip(paths, present, wanted, strict=True)
            if there and file_sha256(path) != digest.hexdigest()
        ]
    if stale:
        with ExitStack() as files:
            writers = [
                files.enter_context(private_writer(path)) if path in stale else None
                for path in paths
            ]
            for blocks in _blocks(ckpt, batch):
                for writer, block in zip(writers, blocks, strict=True):
                    if writer is not None:
                        writer.write(block)
    return stale


def _blocks(ckpt: Checkpoints, batch: int) -> Iterator[tuple[bytes, bytes]]:
    """The two files' bytes a page of candidates at a time: (whole samples, public tasks)."""
    for page in ckpt.batch_payload_pages(batch):
        yield (
            "".join(f"{payload}\n" for payload, _ in page).encode("utf-8"),
            "".join(f"{public}\n" for _, public in page).encode("utf-8"),
        )
