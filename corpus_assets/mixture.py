"""`MixtureDataset`: the training samples of a mixture (`corpus mix`), for every data-parallel rank.

    ds = MixtureDataset("corpus-data/mixtures/web-code-0123456789ab")
    len(ds), ds.seq_len         # training samples; each is seq_len + 1 token ids
    ds[i]                       # sample i of the global shuffled order (a new array)
    ds.provenance(i)            # component, and shard, row and id of every document in it
    part = ds.shard(rank=3, world_size=8, start=8_000)  # this rank's samples from global 8,000
    for sample in part: ...     # rank r reads global samples start + r, start + r + 8, ...
    part.state()                # {"sample": next global sample, ...}: ds.shard(r, w, start=...)

The global order is the index's and does not depend on the world size: ranks of any count read
disjoint samples that together cover it, and a run restarted on another number of ranks at the
same global sample reads the same data in the same order. `MixtureDataset(..., split=
"validation")` reads the held-out documents' samples. Components are `TokenDataset`s (local or
published, read by ranged reads); each is refused when its manifest is no longer the one the
mixture was built from. numpy only: nothing here imports torch.
"""

from __future__ import annotations

import bisect
import hashlib
import io
import json
import os
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from corpus_assets.dataset import MANIFEST, Provenance, TokenDataset

TRAIN, VALIDATION = "train", "validation"
SPLITS = (TRAIN, VALIDATION)
INDEX_DTYPE = np.dtype(
    [("component", "<u2"), ("document", "<u8"), ("offset", "<u4"), ("position", "<u8")]
)
"""A sample's start: its component, document (of the component's build), token offset in that
document, and the same place as a token offset of the component's whole stream."""
RUN_DTYPE = np.dtype([("component", "<u2"), ("split", "u1"), ("start", "<u8"), ("length", "<u8")])
"""A stretch of consecutive documents of one split of one component, in stream tokens."""
INDEX_FILES = ("train.npy", "validation.npy", "runs.npy")


class ComponentChanged(ValueError):
    """A component's token manifest is not the one the mixture was built from."""


@dataclass(frozen=True)
class SampleProvenance:
    """Where sample i comes from: its component, the token `offset` in the first of the
    documents it holds tokens of, and those documents (of the component's build), in order."""

    component: str
    offset: int
    documents: tuple[Provenance, ...]


def manifest_sha256(location: str) -> str:
    """The sha256 of a token build's manifest (its folder, manifest file or URL)."""
    return hashlib.sha256(_read_bytes(_manifest_path(location))).hexdigest()


def component_location(folder: str, location: str) -> str:
    """A component's build as the mixture manifest names it (relative to the mixture folder)."""
    if "://" in location or os.path.isabs(location):
        return location
    if "://" in folder:
        scheme, path = folder.split("://", 1)
        return f"{scheme}://{posixpath.normpath(posixpath.join(path, location))}"
    return os.path.normpath(os.path.join(folder, location))


def check_components(manifest: dict[str, Any], folder: str | Path, shas: dict[str, str]) -> None:
    """ComponentChanged (one line) when a component's manifest sha256 differs from the one the
    mixture manifest recorded; `shas` maps component names to their current sha256."""
    for c in manifest["components"]:
        now = shas.get(c["name"])
        if now != c["manifest_sha256"]:
            raise ComponentChanged(
                f"component {c['name']!r} of mixture {manifest['partition_key']} changed since "
                f"the mixture was built (its token manifest's sha256 is {str(now)[:12]}, the "
                f"mixture read {c['manifest_sha256'][:12]}); build the mixture again (remove "
                f"{folder}) or mix the build it was made from"
            )


class MixtureDataset:
    """A built mixture (its folder, `_MANIFEST.json` or URL): `split` "train" or "validation"."""

    def __init__(self, path: str | os.PathLike[str], split: str = TRAIN) -> None:
        self._open(os.fspath(path), split)

    def __getstate__(self) -> dict[str, str]:
        """Pickles as its location (for data-loader workers), never as the mapped index."""
        return {"path": self.folder, "split": self.split}

    def __setstate__(self, state: dict[str, str]) -> None:
        self._open(state["path"], state["split"])

    def _open(self, location: str, split: str) -> None:
        if split not in SPLITS:
            raise ValueError(f"split {split!r} is not one of {', '.join(SPLITS)}")
        manifest_path = _manifest_path(location)
        self.folder = _parent(manifest_path)
        self.split = split
        raw = _read_bytes(manifest_path)
        self.manifest: dict[str, Any] = json.loads(raw)
        if self.manifest.get("kind") != "mixture":
            raise ValueError(f"{manifest_path} is not a mixture manifest")
        self.seq_len: int = self.manifest["seq_len"]
        self.sha256 = hashlib.sha256(raw).hexdigest()
        """The manifest's sha256: a reader's state names the mixture by it."""
        entries = self.manifest["components"]
        locations = [component_location(self.folder, c["location"]) for c in entries]
        shas = {c["name"]: manifest_sha256(loc) for c, loc in zip(entries, locations, strict=True)}
        check_components(self.manifest, self.folder, shas)
        files = {f["name"]: f for f in self.manifest.get("files", [])}
        runs = _load(self.folder, "runs.npy", files)
        index = _load(self.folder, f"{split}.npy", files)
        self._component = np.array(index["component"])  # in memory: a sample is two lookups
        self._position = np.array(index["position"])
        self._count = len(self._position)
        s = SPLITS.index(split)
        self._parts = [
            _Component(
                c["name"], TokenDataset(loc), runs[(runs["component"] == k) & (runs["split"] == s)]
            )
            for k, (c, loc) in enumerate(zip(entries, locations, strict=True))
        ]

    def __len__(self) -> int:
        return len(self._position)

    def _check(self, i: int) -> int:
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"sample {i} out of range ({n} {self.split} samples)")
        return i % n

    def __getitem__(self, i: int) -> npt.NDArray[Any]:
        """Sample i: `seq_len + 1` token ids (inputs `s[:-1]`, targets `s[1:]`), a new array."""
        if not 0 <= i < self._count:
            i = self._check(i)
        part = self._parts[int(self._component[i])]
        return part.read(int(self._position[i]), self.seq_len + 1)

    def __iter__(self) -> Iterator[npt.NDArray[Any]]:
        return iter(self.shard(0, 1))

    def provenance(self, i: int) -> SampleProvenance:
        """The component of sample i and every document it holds tokens of, in order."""
        i = self._check(i)
        part = self._parts[int(self._component[i])]
        position = int(self._position[i])
        docs = part.documents(position, self.seq_len + 1)
        offset = position - part.document_start(docs[0])
        return SampleProvenance(part.name, offset, tuple(part.ds.provenance(d) for d in docs))

    def shard(self, rank: int, world_size: int, start: int = 0) -> MixtureShard:
        """Rank `rank` of `world_size`: global samples start + rank, start + rank + world_size,
        ... (`start`: global samples already read by all ranks, e.g. step x global batch)."""
        return MixtureShard(self, rank, world_size, start)

    def close(self) -> None:
        for part in self._parts:
            part.ds.close()

    def __repr__(self) -> str:
        names = ", ".join(p.name for p in self._parts)
        return (
            f"MixtureDataset({self.folder!r}, {self.split}: {len(self):,} samples of "
            f"{self.seq_len + 1} tokens from {names})"
        )


class MixtureShard:
    """One rank's samples of a mixture's global order, iterated with a resumable state."""

    def __init__(self, ds: MixtureDataset, rank: int, world_size: int, start: int = 0) -> None:
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} of world_size {world_size}: need 0 <= rank < world_size")
        if not 0 <= start <= len(ds):
            raise ValueError(f"start {start} outside 0..{len(ds)} samples")
        self.ds, self.rank, self.world_size, self.start = ds, rank, world_size, start
        self.read = 0

    def __len__(self) -> int:
        return max(0, -(-(len(self.ds) - self.start - self.rank) // self.world_size))

    def global_index(self, j: int) -> int:
        """The global sample this rank's sample j is."""
        return self.start + self.rank + j * self.world_size

    def __getitem__(self, j: int) -> npt.NDArray[Any]:
        if not 0 <= j < len(self):
            raise IndexError(f"sample {j} out of range ({len(self)} for rank {self.rank})")
        return self.ds[self.global_index(j)]

    def __iter__(self) -> Iterator[npt.NDArray[Any]]:
        while self.read < len(self):
            sample = self[self.read]
            self.read += 1
            yield sample

    def state(self) -> dict[str, Any]:
        """Where every rank is after this one's samples read so far: the next global round."""
        return {
            "mixture": self.ds.sha256,
            "split": self.ds.split,
            "sample": min(self.start + self.read * self.world_size, len(self.ds)),
        }

    def resume(self, state: dict[str, Any]) -> MixtureShard:
        """This rank's reader at `state` (taken under any world size), same mixture checked."""
        if state.get("mixture") != self.ds.sha256 or state.get("split") != self.ds.split:
            raise ValueError("the state is of another mixture or split than this reader's")
        return MixtureShard(self.ds, self.rank, self.world_size, int(state["sample"]))


class _Component:
    """One component of one split: its token build and the runs that split reads."""

    def __init__(self, name: str, ds: TokenDataset, runs: npt.NDArray[Any]) -> None:
        self.name, self.ds = name, ds
        self.starts: list[int] = runs["start"].tolist()
        self.ends: list[int] = (runs["start"] + runs["length"]).tolist()
        self._doc_starts: npt.NDArray[np.uint64] | None = None
        bins = [f for f in ds.manifest["files"] if f["name"].endswith(".bin")]
        self.file_starts = [0]
        for f in bins:
            self.file_starts.append(self.file_starts[-1] + f["tokens"])
        self.files: list[npt.NDArray[Any]] | None = None
        if isinstance(ds.folder, Path):  # local: plain views of the mapped files, sliced fast
            self.files = [_mapped(ds.folder / f["name"], ds.dtype, f["bytes"]) for f in bins]

    def pieces(self, position: int, n: int) -> Iterator[tuple[int, int]]:
        """(start, stop) token ranges of the `n` stream tokens from `position`."""
        r = bisect.bisect_right(self.starts, position) - 1
        while n > 0:
            stop = min(self.ends[r], position + n)
            yield position, stop
            n -= stop - position
            r += 1
            if n > 0:
                position = self.starts[r]

    def read(self, position: int, n: int) -> npt.NDArray[Any]:
        r = bisect.bisect_right(self.starts, position) - 1
        if position + n <= self.ends[r]:
            if self.files is not None:  # most samples: one slice of one file
                k = bisect.bisect_right(self.file_starts, position) - 1
                if position + n <= self.file_starts[k + 1]:
                    local = position - self.file_starts[k]
                    return self.files[k][local : local + n].copy()
            return self.ds.token_range(position, position + n)
        return np.concatenate([self.ds.token_range(a, b) for a, b in self.pieces(position, n)])

    @property
    def doc_starts(self) -> npt.NDArray[np.uint64]:
        if self._doc_starts is None:
            self._doc_starts = document_spans(self.ds)[0]
        return self._doc_starts

    def document_start(self, document: int) -> int:
        return int(self.doc_starts[document])

    def documents(self, position: int, n: int) -> list[int]:
        """The documents (of the component's build) the `n` stream tokens from `position` hold."""
        docs: list[int] = []
        for a, b in self.pieces(position, n):
            first = int(np.searchsorted(self.doc_starts, a, side="right")) - 1
            last = int(np.searchsorted(self.doc_starts, b - 1, side="right")) - 1
            docs += range(first, last + 1)
        return docs


def document_spans(ds: TokenDataset) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """Every document's first token in the build's whole stream, and its length (EOS in)."""
    starts, lengths, base = [], [], 0
    for ends in ds.document_ends():
        s = np.concatenate((np.zeros(1, "<u8"), ends[:-1])) if len(ends) else ends
        starts.append(s + np.uint64(base))
        lengths.append(ends - s)
        base += int(ends[-1]) if len(ends) else 0
    empty = [np.zeros(0, "<u8")]
    return np.concatenate(starts or empty), np.concatenate(lengths or empty)


def _mapped(path: Path, dtype: np.dtype[Any], size: int) -> npt.NDArray[Any]:
    if size == 0:  # mmap cannot map an empty file
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r").view(np.ndarray)


def _manifest_path(location: str) -> str:
    if location.endswith(".json"):
        return location
    if "://" in location:
        return f"{location.rstrip('/')}/{MANIFEST}"
    return os.path.join(location, MANIFEST)


def _parent(path: str) -> str:
    if "://" in path:
        return path.rsplit("/", 1)[0]
    return os.path.dirname(os.path.abspath(path))


def _read_bytes(path: str) -> bytes:
    if "://" not in path:
        return Path(path).read_bytes()
    import fsspec

    with fsspec.open(path, "rb") as fh:
        data: bytes = fh.read()
    return data


def _load(folder: str, name: str, files: dict[str, dict[str, Any]]) -> npt.NDArray[Any]:
    """An index file: mapped on disk, or read whole from a URL and checked against the
    manifest (a changed or cut file would put samples in the wrong places)."""
    if "://" in folder:
        url = f"{folder}/{name}"
        data = _read_bytes(url)
        entry, sha = files.get(name, {}), hashlib.sha256(data).hexdigest()
        if (len(data), sha) != (entry.get("bytes"), entry.get("sha256")):
            raise ValueError(
                f"{url} is not the file the mixture's manifest lists ({len(data)} bytes, sha256 "
                f"{sha[:12]}; the manifest: {entry.get('bytes')} bytes, "
                f"{str(entry.get('sha256'))[:12]}); publish the mixture again"
            )
        array: npt.NDArray[Any] = np.load(io.BytesIO(data))
        return array
    mapped: npt.NDArray[Any] = np.load(os.path.join(folder, name), mmap_mode="r")
    return mapped
