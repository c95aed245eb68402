"""The arithmetic of a mixture's index: a component's split as one token stream and its runs,
the samples (windows) taken from it, how many per component; the `.npy` files written with their
digests. No I/O but the writes; `mixture.py` drives it."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from corpus_assets.core.errors import DataError
from corpus_assets.core.mixture_config import MixtureConfig
from corpus_assets.core.store.atomic import atomic_writer
from corpus_assets.mixture import INDEX_DTYPE, RUN_DTYPE


class Stream:
    """The documents of one split of one component, as one token stream."""

    def __init__(
        self,
        component: int,
        starts: npt.NDArray[np.uint64],
        lengths: npt.NDArray[np.uint64],
        keep: npt.NDArray[np.bool_],
    ) -> None:
        self.component, self.starts, self.keep = component, starts, keep
        docs = np.flatnonzero(keep)
        if len(docs) == 0:
            self.run_docs = docs
            self.run_starts = self.run_lengths = np.zeros(0, dtype="<u8")
        else:
            first = np.flatnonzero(np.diff(docs, prepend=-2) != 1)
            self.run_docs = docs[first]
            self.run_starts = starts[self.run_docs]
            self.run_lengths = np.add.reduceat(lengths[docs], first).astype("<u8")
        self.run_stream = np.concatenate(([0], np.cumsum(self.run_lengths, dtype="<u8")))
        self.tokens = int(self.run_stream[-1])

    def windows(self, seq_len: int) -> int:
        """Windows of `seq_len + 1` tokens at every `seq_len`-th token of one pass."""
        return max(self.tokens - 1, 0) // seq_len

    def samples(self, count: int, seq_len: int) -> npt.NDArray[Any]:
        """Rows of `count` samples: window k % windows, k = 0 .. count - 1."""
        out = np.zeros(count, dtype=INDEX_DTYPE)
        if count == 0:
            return out
        at = (np.arange(count, dtype="<u8") % np.uint64(self.windows(seq_len))) * np.uint64(seq_len)
        run = np.searchsorted(self.run_stream, at, side="right") - 1
        position = self.run_starts[run] + (at - self.run_stream[run])
        document = np.searchsorted(self.starts, position, side="right") - 1
        out["component"] = self.component
        out["document"] = document
        out["offset"] = position - self.starts[document]
        out["position"] = position
        return out

    def runs(self, split: int) -> npt.NDArray[Any]:
        out = np.zeros(len(self.run_starts), dtype=RUN_DTYPE)
        out["component"], out["split"] = self.component, split
        out["start"], out["length"] = self.run_starts, self.run_lengths
        return out


def sample_counts(m: MixtureConfig, trains: list[Stream]) -> list[int]:
    """Training samples per component: by token budget, or by normalized weight of the most
    tokens that upsample no component (or of `total_tokens`)."""
    for spec, t in zip(m.components, trains, strict=True):
        if t.windows(m.seq_len) == 0:
            raise DataError(
                f"component {spec.name!r} holds {t.tokens:,} training tokens, fewer than one "
                f"sample of seq_len + 1 = {m.seq_len + 1:,}"
            )
    if m.by_budget:
        return [max(1, round((c.token_budget or 0) / m.seq_len)) for c in m.components]
    weights = np.array([c.weight or 0.0 for c in m.components])
    weights = weights / weights.sum()
    total = m.total_tokens
    if total is None:
        total = min(
            t.windows(m.seq_len) * m.seq_len / w for t, w in zip(trains, weights, strict=True)
        )
    return [max(1, round(total * w / m.seq_len)) for w in weights]


def save(path: Path, array: npt.NDArray[Any]) -> dict[str, Any]:
    h = hashlib.sha256()
    with atomic_writer(path, sync_dir=False) as fh:
        np.save(_Hashing(fh, h), array, allow_pickle=False)
    return {
        "name": path.name,
        "rows": len(array),
        "bytes": path.stat().st_size,
        "sha256": h.hexdigest(),
    }


class _Hashing:
    """A binary file that also feeds what is written to a hash."""

    def __init__(self, fh: Any, h: Any) -> None:
        self.fh, self.h = fh, h

    def write(self, data: Any) -> int:
        self.h.update(data)
        return int(self.fh.write(data))
