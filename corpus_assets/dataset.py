"""`TokenDataset`: a published token build, memory-mapped, for a training loop.

    ds = TokenDataset("corpus-data/tokens/gpt2/tinystories/v1/a03711ec959b")
    len(ds), ds.tokens          # documents, tokens (EOS included)
    ds[i]                       # document i's token ids, ending with ds.eos_id (read-only view)
    for w in ds.windows(1024):  # 1025 tokens each: inputs w[:-1], targets w[1:]
        ...
    ds.provenance(i)            # Provenance(shard='shard-00000.parquet', row=17, id='...')

The token stream is every shard's `.bin` in manifest order; each document is followed by EOS.
`import corpus_assets` stays light (the `corpus` CLI imports it): numpy is imported when a
dataset is opened, pyarrow only when `provenance` reads ids from the shard Parquet.
"""

from __future__ import annotations

import bisect
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

MANIFEST = "_MANIFEST.json"
_DTYPES = {"uint16": "<u2", "uint32": "<u4"}


@dataclass(frozen=True)
class Provenance:
    """Where document i came from: its shard file, row in that shard, and document id."""

    shard: str
    row: int
    id: str


@dataclass(frozen=True)
class _Part:
    shard: str
    tokens: npt.NDArray[Any]
    ends: npt.NDArray[np.uint64]


class TokenDataset:
    """A token build (its folder or `_MANIFEST.json`), read by memory map."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._open(Path(path))

    def __getstate__(self) -> dict[str, str]:
        """Pickles as its path (for data-loader workers), never as the mapped tokens."""
        return {"path": str(self.manifest_path)}

    def __setstate__(self, state: dict[str, str]) -> None:
        self._open(Path(state["path"]))

    def _open(self, p: Path) -> None:
        import numpy as np

        self.manifest_path = p / MANIFEST if p.is_dir() else p
        self.folder = self.manifest_path.parent
        self.manifest: dict[str, Any] = json.loads(self.manifest_path.read_text("utf-8"))
        if self.manifest.get("kind") != "tokens":
            raise ValueError(f"{self.manifest_path} is not a token build manifest")
        self.dtype = np.dtype(_DTYPES[self.manifest["dtype"]])
        self.eos_id: int = self.manifest["eos_id"]
        self.vocab_size: int = self.manifest["vocab_size"]
        files = {f["name"]: f for f in self.manifest["files"]}
        self._parts = [
            _Part(f["shard"], self._map(f, self.dtype), self._map(files[_idx(f["name"])], "<u8"))
            for f in self.manifest["files"]
            if f["name"].endswith(".bin")
        ]
        self._doc_starts = _cumulative([len(p.ends) for p in self._parts])
        self._tok_starts = _cumulative([len(p.tokens) for p in self._parts])
        self._ids: dict[str, Any] = {}

    def _map(self, entry: dict[str, Any], dtype: Any) -> npt.NDArray[Any]:
        import numpy as np

        if entry["bytes"] == 0:  # mmap cannot map an empty file
            return np.zeros(0, dtype=dtype)
        return np.memmap(self.folder / entry["name"], dtype=dtype, mode="r")

    def __len__(self) -> int:
        return self._doc_starts[-1]

    @property
    def tokens(self) -> int:
        """Tokens in the whole build, EOS included."""
        return self._tok_starts[-1]

    def _locate(self, i: int) -> tuple[int, int]:
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"document {i} out of range ({n} documents)")
        i %= n
        part = bisect.bisect_right(self._doc_starts, i) - 1
        return part, i - self._doc_starts[part]

    def __getitem__(self, i: int) -> npt.NDArray[Any]:
        """Document i's token ids followed by EOS (a read-only view of the mapped file)."""
        part, row = self._locate(i)
        ends = self._parts[part].ends
        start = int(ends[row - 1]) if row else 0
        return self._parts[part].tokens[start : int(ends[row])]

    def __iter__(self) -> Iterator[npt.NDArray[Any]]:
        for i in range(len(self)):
            yield self[i]

    def windows(self, seq_len: int, stride: int | None = None) -> Iterator[npt.NDArray[Any]]:
        """Fixed windows of `seq_len + 1` tokens over the whole stream, in order (copies).

        Window k starts at token `k * stride` (default `seq_len`), so consecutive windows share
        one token: use `w[:-1]` as inputs and `w[1:]` as targets. Windows cross document and
        file boundaries (documents are separated by EOS); a last partial window is dropped.
        """
        if seq_len < 1:
            raise ValueError(f"seq_len must be at least 1, got {seq_len}")
        step = seq_len if stride is None else stride
        if step < 1:
            raise ValueError(f"stride must be at least 1, got {stride}")
        for start in range(0, self.tokens - seq_len, step):
            yield self.token_range(start, start + seq_len + 1)

    def token_range(self, start: int, stop: int) -> npt.NDArray[Any]:
        """Tokens `start:stop` of the concatenated stream, as a new array."""
        if not 0 <= start <= stop <= self.tokens:
            raise IndexError(f"token range {start}:{stop} outside 0:{self.tokens}")
        import numpy as np

        out = np.empty(stop - start, dtype=self.dtype)
        pos = start
        part = bisect.bisect_right(self._tok_starts, start) - 1
        while pos < stop:
            base = self._tok_starts[part]
            chunk = self._parts[part].tokens[pos - base : stop - base]
            out[pos - start : pos - start + len(chunk)] = chunk
            pos += len(chunk)
            part += 1
        return out

    def provenance(self, i: int) -> Provenance:
        """Shard, row and document id of document i (the id is read from the shard Parquet)."""
        part, row = self._locate(i)
        shard = self._parts[part].shard
        return Provenance(shard, row, self._shard_ids(shard).id_at(row))

    def _shard_ids(self, shard: str) -> _ShardIds:
        if shard not in self._ids:
            shards_folder = (self.folder / self.manifest["shards_manifest"]).parent
            self._ids[shard] = _ShardIds(shards_folder / shard)
        ids: _ShardIds = self._ids[shard]
        return ids

    def __repr__(self) -> str:
        return (
            f"TokenDataset({str(self.folder)!r}: {len(self):,} documents, {self.tokens:,} tokens, "
            f"{self.manifest['dtype']}, eos {self.eos_id})"
        )


class _ShardIds:
    """Ids of one shard's rows, read one row group at a time."""

    def __init__(self, path: Path) -> None:
        import pyarrow.parquet as pq

        if not path.is_file():
            raise FileNotFoundError(f"shard {path} is not there: provenance ids need the shards")
        self.file = pq.ParquetFile(path)
        meta = self.file.metadata
        self.starts = _cumulative([meta.row_group(g).num_rows for g in range(meta.num_row_groups)])
        self.cached: tuple[int, list[Any]] | None = None

    def id_at(self, row: int) -> str:
        group = bisect.bisect_right(self.starts, row) - 1
        if self.cached is None or self.cached[0] != group:
            ids = self.file.read_row_group(group, columns=["id"]).column(0).to_pylist()
            self.cached = (group, ids)
        return str(self.cached[1][row - self.starts[group]])


def _idx(bin_name: str) -> str:
    return bin_name[: -len(".bin")] + ".idx"


def _cumulative(sizes: list[int]) -> list[int]:
    out = [0]
    for size in sizes:
        out.append(out[-1] + size)
    return out
