"""The pool's task-id keys in memory: which 64-bit keys are pooled, at which pool positions, with
the first 64 bits of each candidate's content digest.

Deduplication asks it about every cleaned candidate, a chunk at a time, with a few vectorized
binary searches instead of a database lookup per candidate, and no database index has to be
kept up to date on every insert. It holds 24 bytes per pooled candidate (10 million: 240 MB) in
sorted runs whose sizes at least double from the newest to the oldest (a log-structured merge):
adding a chunk sorts that chunk, and merges runs only when a newer one has grown to half of the
one before it, so each key is copied O(log n) times in all. The checkpoint database keeps the
keys too (`pool_keys`), so a resumed job rebuilds the index with one read.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Int64s = npt.NDArray[np.int64]

_EMPTY = np.zeros(0, np.int64)


class KeyIndex:
    """Sorted runs of (task-id key, digest prefix, pool position); newest last."""

    def __init__(self) -> None:
        self._runs: list[tuple[Int64s, Int64s, Int64s]] = []

    def __len__(self) -> int:
        return sum(len(keys) for keys, _, _ in self._runs)

    def add(self, keys: Int64s, digests: Int64s, seqs: Int64s) -> None:
        """Index the candidates at pool positions `seqs`."""
        if not len(keys):
            return
        order = np.argsort(keys, kind="stable")
        self._runs.append((keys[order], digests[order], seqs[order]))
        while len(self._runs) > 1 and 2 * len(self._runs[-1][0]) >= len(self._runs[-2][0]):
            newer, older = self._runs.pop(), self._runs.pop()
            merged = [np.concatenate((a, b)) for a, b in zip(older, newer, strict=True)]
            order = np.argsort(merged[0], kind="stable")
            self._runs.append((merged[0][order], merged[1][order], merged[2][order]))

    def probe(self, keys: Int64s) -> tuple[npt.NDArray[np.bool_], Int64s]:
        """For each key: whether a pooled candidate has it, and the digest prefix of one that
        does (0 where none does). Two pooled candidates share a key only when their task ids'
        64-bit keys collide; `positions` lists them all."""
        found = np.zeros(len(keys), np.bool_)
        digests = np.zeros(len(keys), np.int64)
        for run_keys, run_digests, _ in self._runs:
            at = np.searchsorted(run_keys, keys)
            np.minimum(at, len(run_keys) - 1, out=at)
            hit = run_keys[at] == keys
            digests[hit] = run_digests[at[hit]]
            found |= hit
        return found, digests

    def positions(self, key: int) -> list[int]:
        """The pool positions of every candidate whose task-id key is `key`, in pool order."""
        out: list[int] = []
        for run_keys, _, run_seqs in self._runs:
            first = int(np.searchsorted(run_keys, key, side="left"))
            last = int(np.searchsorted(run_keys, key, side="right"))
            out.extend(int(s) for s in run_seqs[first:last])
        return sorted(out)


def digest_prefixes(digests: bytes, count: int) -> Int64s:
    """The first 8 bytes of each of `count` concatenated 32-byte digests, as int64."""
    if not count:
        return _EMPTY
    return np.frombuffer(digests, "<i8").reshape(count, 4)[:, 0]
