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

A published build opens by its URL (`s3://BUCKET/PREFIX`, `https://…`, `hf://…`, any fsspec
URL that `corpus publish` wrote to): the token and index files are read where they are, by
ranged reads of REMOTE_BLOCK bytes cached per file (REMOTE_CACHE_BLOCKS of them), never copied
whole. Run `corpus verify URL` once to check the published bytes against the manifest. A
ranged read that answers other bytes than asked (a server that ignores ranges, a cut body), or
from a file whose ETag changed since it was opened (compared here over S3; sent as If-Match over
HTTP), fails in one line.
"""

from __future__ import annotations

import bisect
import json
import os
import posixpath
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

MANIFEST = "_MANIFEST.json"
_DTYPES = {"uint16": "<u2", "uint32": "<u4"}
REMOTE_BLOCK = 1 << 20
"""Bytes a ranged read of a published file fetches at least."""
REMOTE_CACHE_BLOCKS = 32
"""Blocks of each published file kept in memory."""
REMOTE_TRIES = 4
"""Tries of a ranged read the network breaks (a cut body, a dropped connection) before it fails."""
REMOTE_PAUSE_S = 0.2
"""The pause before the second try; the next ones wait that many times longer."""


@dataclass(frozen=True)
class Provenance:
    """Where document i came from: its shard file, row in that shard, and document id."""

    shard: str
    row: int
    id: str


@dataclass(frozen=True)
class _Part:
    shard: str
    tokens: npt.NDArray[Any] | _RemoteArray
    ends: npt.NDArray[np.uint64] | _RemoteArray


class TokenDataset:
    """A token build (its folder or `_MANIFEST.json`), read by memory map; or a published one
    (its URL), read by ranged reads.

    `shards` names the shards build that `provenance` reads ids from (a folder or URL) where it
    is not where the token manifest's relative `shards_manifest` points.
    """

    def __init__(
        self, path: str | os.PathLike[str], shards: str | os.PathLike[str] | None = None
    ) -> None:
        self._open(os.fspath(path), None if shards is None else os.fspath(shards))

    def __getstate__(self) -> dict[str, str | None]:
        """Pickles as its location (for data-loader workers), never as the mapped tokens."""
        return {"path": self._files.manifest, "shards": self._shards}

    def __setstate__(self, state: dict[str, str | None]) -> None:
        self._open(str(state["path"]), state.get("shards"))

    def _open(self, location: str, shards: str | None) -> None:
        import numpy as np

        self._files: _Files = _RemoteFiles(location) if _is_url(location) else _LocalFiles(location)
        self._shards = shards
        self.manifest_path: Path | str = self._files.manifest_path
        self.folder: Path | str = self._files.folder
        self.manifest: dict[str, Any] = json.loads(self._files.manifest_bytes())
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

    def _map(self, entry: dict[str, Any], dtype: Any) -> npt.NDArray[Any] | _RemoteArray:
        import numpy as np

        if entry["bytes"] == 0:  # mmap cannot map an empty file
            return np.zeros(0, dtype=dtype)
        return self._files.array(entry["name"], np.dtype(dtype), entry["bytes"])

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

    def document_ends(self) -> list[npt.NDArray[np.uint64]]:
        """Per token file, in manifest order, its `.idx`: each document's end offset (a copy)."""
        import numpy as np

        return [np.array(p.ends[0 : len(p.ends)], dtype="<u8") for p in self._parts]

    def document_ids(self, shard: str) -> list[str]:
        """The document ids of one shard (a token file's `shard`), in row order."""
        table = self._shard_ids(shard).file.read(columns=["id"])
        return [str(i) for i in table.column(0).to_pylist()]

    def _shard_ids(self, shard: str) -> _ShardIds:
        if shard not in self._ids:
            if self._shards is not None:
                files = _RemoteFiles(self._shards) if _is_url(self._shards) else None
                folder = files.folder if files else str(_LocalFiles(self._shards).folder)
            else:
                files = self._files if isinstance(self._files, _RemoteFiles) else None
                folder = self._files.relative(self.manifest["shards_manifest"], parent=True)
            self._ids[shard] = _ShardIds(folder, shard, files)
        ids: _ShardIds = self._ids[shard]
        return ids

    def close(self) -> None:
        """Close a published build's open files (a local build holds only memory maps)."""
        self._files.close()

    def __repr__(self) -> str:
        return (
            f"TokenDataset({str(self.folder)!r}: {len(self):,} documents, {self.tokens:,} tokens, "
            f"{self.manifest['dtype']}, eos {self.eos_id})"
        )


class _ShardIds:
    """Ids of one shard's rows, read one row group at a time."""

    def __init__(self, folder: str, shard: str, remote: _RemoteFiles | None) -> None:
        import pyarrow.parquet as pq

        if remote is None:
            path = Path(folder) / shard
            if not path.is_file():
                raise FileNotFoundError(
                    f"shard {path} is not there: provenance ids need the shards "
                    "(TokenDataset(..., shards=FOLDER_OR_URL) says where they are)"
                )
            self.file = pq.ParquetFile(path)
        else:
            self.file = pq.ParquetFile(remote.open(posixpath.join(folder, shard)))
        meta = self.file.metadata
        self.starts = _cumulative([meta.row_group(g).num_rows for g in range(meta.num_row_groups)])
        self.cached: tuple[int, list[Any]] | None = None

    def id_at(self, row: int) -> str:
        group = bisect.bisect_right(self.starts, row) - 1
        if self.cached is None or self.cached[0] != group:
            ids = self.file.read_row_group(group, columns=["id"]).column(0).to_pylist()
            self.cached = (group, ids)
        return str(self.cached[1][row - self.starts[group]])


def _is_url(location: str) -> bool:
    return "://" in location


class _LocalFiles:
    """A build folder on disk: files are memory-mapped."""

    def __init__(self, location: str) -> None:
        p = Path(location)
        self.manifest_path = p / MANIFEST if p.is_dir() else p
        self.folder = self.manifest_path.parent
        self.manifest = str(self.manifest_path)

    def manifest_bytes(self) -> bytes:
        return self.manifest_path.read_bytes()

    def array(self, name: str, dtype: np.dtype[Any], size: int) -> npt.NDArray[Any]:
        import numpy as np

        return np.memmap(self.folder / name, dtype=dtype, mode="r")

    def relative(self, path: str, parent: bool = False) -> str:
        target = self.folder / path
        return str(target.parent if parent else target)

    def close(self) -> None:
        pass


class _RemoteFiles:
    """A published build behind a URL, read through fsspec: the manifest whole, the rest in
    ranged reads."""

    def __init__(self, location: str) -> None:
        import fsspec

        # S3: every ranged GET's ETag is compared here with the one the file had when opened,
        # so an object replaced while it is read fails even behind a server that ignores If-Match
        pinned = {"local_expiry_check": True} if location.startswith(("s3://", "s3a://")) else {}
        self.fs, path = fsspec.core.url_to_fs(location, **pinned)
        if not path.endswith(".json"):
            path = posixpath.join(path.rstrip("/"), MANIFEST)
        self._scheme = location.split("://", 1)[0]
        self.manifest = f"{self._scheme}://{path}" if "://" not in path else path
        self.manifest_path = self.manifest
        self._manifest_key = path
        self.folder = posixpath.dirname(path)
        self._open: list[Any] = []

    def manifest_bytes(self) -> bytes:
        try:
            data: bytes = self.fs.cat_file(self._manifest_key)
        except FileNotFoundError:
            raise FileNotFoundError(f"{self.manifest}: no token build manifest there") from None
        return data

    def url(self, path: str) -> str:
        return path if "://" in path else f"{self._scheme}://{path}"

    def open(self, path: str) -> Any:
        conditions: dict[str, Any] = {}
        if self._scheme in ("http", "https"):  # every ranged GET asks for the file as it was
            etag = self.fs.info(path).get("ETag")
            if etag:
                conditions["headers"] = {"If-Match": etag}
        fh = self.fs.open(
            path,
            "rb",
            block_size=REMOTE_BLOCK,
            cache_type="blockcache",
            cache_options={"maxblocks": REMOTE_CACHE_BLOCKS},
            **conditions,
        )
        cache = getattr(fh, "cache", None)  # a remote file's blocks (file:// has none)
        if cache is not None:
            cache.fetcher = _whole_ranges(cache.fetcher, self.url(path), fh.size)
        self._open.append(fh)
        return fh

    def array(self, name: str, dtype: np.dtype[Any], size: int) -> _RemoteArray:
        path = posixpath.join(self.folder, name)
        return _RemoteArray(self.open(path), dtype, size, self.url(path))

    def relative(self, path: str, parent: bool = False) -> str:
        target = posixpath.normpath(posixpath.join(self.folder, path))
        return posixpath.dirname(target) if parent else target

    def close(self) -> None:
        for fh in self._open:
            fh.close()
        self._open.clear()


class _RemoteArray:
    """A published file of fixed-size items: `len`, an item, or a slice (step 1) read as a new
    read-only array."""

    def __init__(self, fh: Any, dtype: np.dtype[Any], size: int, url: str) -> None:
        self.fh, self.dtype, self.url = fh, dtype, url
        self.count = size // dtype.itemsize

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, key: int | slice) -> Any:
        if isinstance(key, slice):
            start, stop, step = key.indices(self.count)
            if step != 1:
                raise ValueError("a published token file is read in slices of step 1")
            return self._read(start, max(stop, start))
        i = key + self.count if key < 0 else key
        if not 0 <= i < self.count:
            raise IndexError(f"item {key} out of range ({self.count} items)")
        return self._read(i, i + 1)[0]

    def _read(self, start: int, stop: int) -> npt.NDArray[Any]:
        import numpy as np

        size = self.dtype.itemsize
        try:
            data = self._read_bytes(start * size, (stop - start) * size)
        except Exception as exc:
            if not _changed(exc):
                raise
            raise OSError(
                f"{self.url} changed while it was read (its ETag is not the one it had when "
                "the dataset opened it); open the dataset again, and `corpus verify URL` "
                "checks the published bytes"
            ) from None
        if len(data) != (stop - start) * size:
            raise OSError(
                f"{self.url}: short read at byte {start * size} (changed since "
                "it was published? corpus verify URL checks it)"
            )
        out = np.frombuffer(data, dtype=self.dtype)
        return out

    def _read_bytes(self, offset: int, length: int) -> bytes:
        """The bytes at `offset`, the read asked again (REMOTE_TRIES in all, a pause between)
        when the network breaks it: a cut body, a dropped connection, a timeout."""
        for attempt in range(1, REMOTE_TRIES + 1):
            try:
                self.fh.seek(offset)
                data: bytes = self.fh.read(length)
                return data
            except Exception as exc:
                broken = isinstance(exc, ConnectionError | TimeoutError) or (
                    type(exc).__module__.startswith("aiohttp")
                )
                if not broken or _changed(exc):
                    raise
                if attempt == REMOTE_TRIES:
                    raise OSError(
                        f"{self.url}: the read of bytes {offset}-{offset + length - 1} broke "
                        f"{REMOTE_TRIES} times, the last time with {type(exc).__name__}: {exc}"
                    ) from None
                time.sleep(REMOTE_PAUSE_S * attempt)
        raise AssertionError("unreachable")


_Files = _LocalFiles | _RemoteFiles


def _changed(exc: BaseException) -> bool:
    """Whether a failed read says the file is no longer the one opened: s3fs's FileExpired (an
    ETag changed), or an HTTP 412 (its If-Match failed)."""
    from s3fs.utils import FileExpired

    return isinstance(exc, FileExpired) or getattr(exc, "status", None) == 412


def _whole_ranges(fetch: Any, url: str, size: int) -> Any:
    """`fetch(start, end)` that refuses any answer but exactly bytes start..end-1 (to the end of
    the file): a server that ignores the range (the whole file from byte 0) or cuts the body
    would otherwise have its bytes read as the ones asked for."""

    def fetched(start: int, end: int) -> bytes:
        data: bytes = fetch(start, end)
        want = max(min(end, size) - start, 0)
        if len(data) != want:
            raise OSError(
                f"{url}: asked for bytes {start}-{end - 1}, the server sent {len(data)} bytes "
                f"instead of {want} (it ignored the range or cut the body); nothing of it is used"
            )
        return data

    return fetched


def _idx(bin_name: str) -> str:
    return bin_name[: -len(".bin")] + ".idx"


def _cumulative(sizes: list[int]) -> list[int]:
    out = [0]
    for size in sizes:
        out.append(out[-1] + size)
    return out
