"""Readers for each source kind: they yield documents and never write anything."""

from __future__ import annotations

import bz2
import codecs
import glob
import hashlib
import io
import json
import lzma
import math
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NoReturn

import pyarrow.parquet as pq
import zstandard

from corpus_assets.core.config import LoadedConfig, SourceSpec
from corpus_assets.core.errors import ConfigError, DataError, TransientError
from corpus_assets.core.store.digests import file_sha256
from corpus_assets.core.store.remote import is_remote

READ_CHUNK = 1 << 20


@dataclass(frozen=True)
class RawDoc:
    """One document as read: its id in the source (or None), text, other fields and where it is
    (`file:line`, `file: row N`), for messages."""

    source_id: str | None
    text: str
    meta: dict[str, Any]
    where: str


@dataclass(frozen=True)
class InputFile:
    name: str
    path: Path
    sha256: str
    bytes: int


def expand_inputs(cfg: LoadedConfig, spec: SourceSpec) -> list[Path]:
    """The files a local source names: one file, every file in a folder, or a glob.

    A path that matches no file is a config error (a typo), raised before anything is read. A
    folder or a glob yields no file outside the folder it starts in: a symbolic link that leads
    out of it is bad data (exit 65) naming the link; a file named directly may be a link.
    """
    target = cfg.resolve(spec.path)
    if any(ch in spec.path for ch in "*?["):
        files = sorted(Path(p) for p in glob.glob(str(target), recursive=True))
        files = [p for p in files if p.is_file()]
        if not files:
            raise ConfigError(
                f"source {spec.name!r}: no files match {spec.path!r} (in {target.parent})"
            )
        return _inside(spec, _glob_root(target), files)
    if target.is_file():
        return [target]
    if target.is_dir():
        files = sorted(p for p in target.rglob("*") if p.is_file() and not p.name.startswith("."))
        if not files:
            raise ConfigError(f"source {spec.name!r}: folder {target} holds no files")
        return _inside(spec, target, files)
    raise ConfigError(f"source {spec.name!r}: input not found: {target}")


def _glob_root(pattern: Path) -> Path:
    """The folder a glob starts in: its leading parts without a wildcard."""
    fixed: list[str] = []
    for part in pattern.parts:
        if any(ch in part for ch in "*?["):
            break
        fixed.append(part)
    return Path(*fixed)


def _inside(spec: SourceSpec, folder: Path, files: list[Path]) -> list[Path]:
    """`files`, after checking that each really lies in `folder` (links resolved)."""
    if (link := link_out_of(folder, files)) is not None:
        raise DataError(
            f"source {spec.name!r}: {link} is a symbolic link out of {folder} (to "
            f"{link.resolve()}); a folder or glob source reads only files inside it"
        )
    return files


def link_out_of(folder: Path, paths: list[Path]) -> Path | None:
    """The first of `paths` whose real location is outside `folder`'s, or None."""
    real = folder.resolve()
    return next((p for p in paths if not p.resolve().is_relative_to(real)), None)


def describe_inputs(files: list[Path]) -> list[InputFile]:
    common = Path(*Path(files[0]).parts[:-1]) if len(files) == 1 else _common_parent(files)
    return [
        InputFile(str(f.relative_to(common)), f, file_sha256(f), f.stat().st_size) for f in files
    ]


def _common_parent(files: list[Path]) -> Path:
    parts = [f.parent.parts for f in files]
    prefix: list[str] = []
    for level in zip(*parts, strict=False):
        if len(set(level)) != 1:
            break
        prefix.append(level[0])
    return Path(*prefix)


def inputs_sha256(inputs: list[InputFile]) -> str:
    """The pin of a source: a single file's sha256, or sha256 of `sha256sum`-style lines."""
    if len(inputs) == 1:
        return inputs[0].sha256
    listing = "".join(f"{i.sha256}  {i.name}\n" for i in sorted(inputs, key=lambda i: i.name))
    return hashlib.sha256(listing.encode("utf-8")).hexdigest()


def _decode(line: bytes, path: Path, lineno: int) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{path}:{lineno}: not valid UTF-8 "
            f"(byte 0x{line[exc.start]:02x} at column {exc.start + 1})"
        ) from None


def _text_of(record: dict[str, Any], spec: SourceSpec, where: str) -> RawDoc:
    if spec.text_field not in record:
        fields = ", ".join(sorted(record)) or "none"
        raise DataError(f"{where}: no field {spec.text_field!r} (text_field); fields: {fields}")
    text = record[spec.text_field]
    if not isinstance(text, str):
        raise DataError(
            f"{where}: field {spec.text_field!r} is {type(text).__name__}, not a string"
        )
    source_id: str | None = None
    if spec.id_field is not None:
        if record.get(spec.id_field) is None:
            raise DataError(f"{where}: no value for id field {spec.id_field!r}")
        source_id = str(record[spec.id_field])
    meta = {k: v for k, v in record.items() if k not in (spec.text_field, spec.id_field)}
    return RawDoc(source_id, text, meta, where)


def read_jsonl(path: Path, spec: SourceSpec) -> Iterator[RawDoc]:
    """One document per line, of a plain or compressed file. Memory: about twice the longest
    line (its bytes are released once decoded, its decoded line once parsed)."""
    with open_input(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            if line.isspace():
                continue
            where = f"{path}:{lineno}"
            decoded = _decode(line, path, lineno)
            del line
            record = _json_line(decoded, where)
            del decoded
            if not isinstance(record, dict):
                raise DataError(
                    f"{where}: a JSON line must be an object, got {type(record).__name__}"
                )
            yield _text_of(record, spec, where)


SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # a \uD800-\uDFFF escape


def _json_line(line: str, where: str) -> Any:
    """One JSON value; strict JSON only: anything else is bad data at `where` (exit 65)."""
    try:
        record = json.loads(line, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: malformed JSON line: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise DataError(f"{where}: malformed JSON line: nested too deeply") from None
    except ValueError as exc:  # a constant, an infinite float, an integer too long to convert
        raise DataError(f"{where}: malformed JSON line: {exc}") from None
    if SURROGATE_ESCAPE.search(line):  # a pair is one character; a lone half is no text
        try:
            json.dumps(record, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise DataError(
                f"{where}: malformed JSON line: a lone UTF-16 surrogate "
                f"(\\u{ord(exc.object[exc.start]):04x}) is not text"
            ) from None
    return record


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _finite(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError(f"{literal[:20]} is out of range for a number")
    return value


def read_parquet(path: Path, spec: SourceSpec) -> Iterator[RawDoc]:
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise DataError(f"{path}: not a readable Parquet file: {exc}") from None
    names = pf.schema_arrow.names
    if spec.text_field not in names:
        raise DataError(
            f"{path}: no column {spec.text_field!r} (text_field); columns: {', '.join(names)}"
        )
    row = 0
    for batch in pf.iter_batches(batch_size=4096):
        for record in batch.to_pylist():
            row += 1
            yield _text_of(record, spec, f"{path}: row {row}")


def read_text(path: Path, spec: SourceSpec) -> Iterator[RawDoc]:
    """One document per file, or per `separator`-delimited part, streamed. Memory: about twice
    the longest part (its bytes are released once decoded)."""
    line = 1
    for raw in _split_file(path, spec.separator.encode("utf-8") if spec.separator else None):
        try:
            decoded = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            at = line + raw.count(b"\n", 0, exc.start)
            raise DataError(f"{path}:{at}: not valid UTF-8 (byte 0x{raw[exc.start]:02x})") from None
        del raw
        where = f"{path}:{line}"
        line += decoded.count("\n") + (spec.separator or "").count("\n")
        doc = decoded.strip()
        del decoded
        if doc:
            yield RawDoc(None, doc, {"file": path.name}, where)


def _split_file(path: Path, sep: bytes | None) -> Iterator[bytes]:
    """The parts of a file between occurrences of `sep` (like `bytes.split`), read in chunks.

    Splitting the UTF-8 bytes on the UTF-8 separator equals splitting the decoded text.
    """
    if not sep:
        with open_input(path) as whole:
            yield whole.read()
        return
    buf = bytearray()
    with open_input(path) as fh:
        while chunk := fh.read(READ_CHUNK):
            scan = max(len(buf) - len(sep) + 1, 0)
            buf += chunk
            start = 0
            while (hit := buf.find(sep, max(scan, start))) != -1:
                with memoryview(buf) as view:  # one copy of the part, not two
                    yield bytes(view[start:hit])
                start = hit + len(sep)
            del buf[:start]
    yield _drained(buf)


def _drained(buf: bytearray) -> bytes:
    """The bytes of `buf`, which is left empty (the caller keeps no second copy)."""
    out = bytes(buf)
    buf.clear()
    return out


# Compressed inputs: the first bytes decide (an extension may lie either way), the stream is
# decoded piece by piece, and each codec's members or frames follow one another in one file.
MAGIC: tuple[tuple[str, re.Pattern[bytes]], ...] = (
    ("gzip", re.compile(rb"\x1f\x8b")),
    ("zstd", re.compile(rb"\x28\xb5\x2f\xfd")),
    ("xz", re.compile(rb"\xfd7zXZ\x00")),
    # "BZh", the block size, then a block's or the end's magic: plain text may begin "BZh"
    ("bzip2", re.compile(rb"BZh[1-9](\x31\x41\x59\x26\x53\x59|\x17\x72\x45\x38\x50\x90)")),
)
SUFFIX_CODECS = {".gz": "gzip", ".zst": "zstd", ".xz": "xz", ".bz2": "bzip2"}
PIECE = 1 << 16  # compressed bytes read at a time: the precision of a reported offset
OUT_PIECE = 1 << 16  # decoded bytes made at a time (bounds memory for any ratio)
ZSTD_FEED = 1 << 12  # zstd has no output limit: small inputs bound its output instead
DECODE_ERRORS = (zlib.error, OSError, lzma.LZMAError, zstandard.ZstdError, EOFError)


def compression_of(path: Path) -> str | None:
    """The codec a file is compressed with, by its first bytes; None for a plain file."""
    with open(path, "rb") as fh:
        head = fh.read(10)
    return next((codec for codec, magic in MAGIC if magic.match(head)), None)


def open_input(path: Path) -> IO[bytes]:
    """`path` opened for reading its content: decompressed when its first bytes say gzip, zstd,
    bzip2 or xz, whatever its name. A corrupt or cut-off stream is DataError (exit 65) naming
    the file and the compressed byte offset at which decoding stopped."""
    codec = compression_of(path)
    if codec is None:
        _plain_despite_name(path)
        return open(path, "rb")
    return io.BufferedReader(_Decompressed(path, codec, open(path, "rb")), buffer_size=PIECE)


def _plain_despite_name(path: Path) -> None:
    """A file named as compressed but without the codec's first bytes is read as plain text;
    if it does not begin as text either, its header is what is broken: DataError saying so."""
    claimed = SUFFIX_CODECS.get(path.suffix.lower())
    if claimed is None:
        return
    with open(path, "rb") as fh:
        head = fh.read(4096)
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
        text = b"\x00" not in head
    except UnicodeDecodeError:
        text = False
    if not text:
        raise DataError(
            f"{path}: corrupt {claimed} data: no {claimed} header at compressed byte 0, "
            "and not plain text either"
        )


def _decoder(codec: str) -> Any:
    if codec == "gzip":
        return zlib.decompressobj(wbits=31)  # one member; checks its CRC and length
    if codec == "bzip2":
        return bz2.BZ2Decompressor()
    if codec == "xz":
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    return zstandard.ZstdDecompressor().decompressobj()


class _Decompressed(io.RawIOBase):
    """The decoded bytes of one compressed file, made as they are read (every member/frame)."""

    def __init__(self, path: Path, codec: str, raw: IO[bytes]) -> None:
        super().__init__()
        self.path, self.codec, self.raw = path, codec, raw
        self.read_so_far = 0  # compressed bytes taken from the file
        self.pending = b""  # compressed bytes read but not yet given to the decoder
        self.decoder: Any = None  # None between members
        self.out = bytearray()
        self.ended = False

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.raw.close()
        super().close()

    def readinto(self, buffer: Any) -> int:
        try:
            while not self.out and not self.ended:
                self._step()
        except DECODE_ERRORS as exc:
            raise DataError(
                f"{self.path}: corrupt {self.codec} data: decoding stopped at compressed byte "
                f"{self.read_so_far:,}: {exc}"
            ) from None
        n = min(len(buffer), len(self.out))
        buffer[:n] = self.out[:n]
        del self.out[:n]
        return n

    def _more(self) -> bool:
        """Read the next piece of the file into `pending`; False at its end."""
        piece = self.raw.read(PIECE)
        self.read_so_far += len(piece)
        self.pending += piece
        return bool(piece)

    def _step(self) -> None:
        if self.decoder is None:  # before a member: the file's end, padding, or a new member
            self.pending = self.pending.lstrip(b"\x00")
            if not self.pending and not self._more():
                self.ended = True
                return
            if self.pending:
                self.decoder = _decoder(self.codec)
            return
        made = self._decode()
        if self.decoder.eof:
            self.pending = self.decoder.unused_data + self.pending
            self.decoder = None
        elif not made and not self._input_waiting() and not self._more():
            raise_truncated(self.path, self.codec, self.read_so_far)
        self.out += made

    def _input_waiting(self) -> bool:
        """Whether the decoder still holds input it can make output from without more."""
        d = self.decoder
        if isinstance(d, bz2.BZ2Decompressor | lzma.LZMADecompressor):
            return bool(self.pending) or not d.needs_input
        return bool(self.pending) or bool(getattr(d, "unconsumed_tail", b""))

    def _decode(self) -> bytes:
        d = self.decoder
        if isinstance(d, bz2.BZ2Decompressor | lzma.LZMADecompressor):
            feed, self.pending = (self.pending, b"") if d.needs_input else (b"", self.pending)
            return bytes(d.decompress(feed, OUT_PIECE))
        if self.codec == "gzip":
            made = d.decompress(d.unconsumed_tail + self.pending, OUT_PIECE)
            self.pending = b""
            return bytes(made)
        feed, self.pending = self.pending[:ZSTD_FEED], self.pending[ZSTD_FEED:]
        return bytes(d.decompress(feed))


def raise_truncated(path: Path, codec: str, size: int) -> NoReturn:
    raise DataError(
        f"{path}: truncated {codec} data: the file ends at compressed byte {size:,} in the "
        "middle of a stream"
    )


def read_hf(cfg: LoadedConfig, spec: SourceSpec, cache_dir: Path) -> Iterator[RawDoc]:
    """A Hugging Face dataset: local data files by builder, or a hub id (needs the network)."""
    import datasets  # slow import, only for hf sources

    # datasets logs a load error before raising it; the raised error becomes our one message
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)
    local = _local_hf_files(cfg, spec)
    try:
        if local is not None:
            builder, files = local
            ds = datasets.load_dataset(
                builder,
                data_files=files,
                split=spec.split,
                streaming=True,
                cache_dir=str(cache_dir),
            )
        else:
            ds = datasets.load_dataset(
                spec.path,
                name=spec.subset,
                split=spec.split,
                streaming=True,
                cache_dir=str(cache_dir),
            )
        for row, record in enumerate(ds, start=1):
            yield _text_of(dict(record), spec, f"{spec.path} ({spec.split}) row {row}")
    except (ConnectionError, TimeoutError) as exc:
        raise TransientError(f"source {spec.name!r}: cannot reach {spec.path!r}: {exc}") from None
    except (ValueError, FileNotFoundError) as exc:  # includes datasets' DatasetNotFoundError
        if "offline" in str(exc).lower() or "connect" in str(exc).lower():
            raise TransientError(
                f"source {spec.name!r}: cannot reach {spec.path!r}: {exc}"
            ) from None
        raise DataError(f"source {spec.name!r}: cannot load {spec.path!r}: {exc}") from None
    except OSError as exc:
        raise TransientError(f"source {spec.name!r}: cannot reach {spec.path!r}: {exc}") from None


HF_BUILDERS = {
    ".jsonl": "json",
    ".json": "json",
    ".parquet": "parquet",
    ".txt": "text",
    ".csv": "csv",
}


def is_local(cfg: LoadedConfig, spec: SourceSpec) -> bool:
    """Whether a source reads local files (every kind but `hf`, unless its path is a URL; `hf`
    with local data files)."""
    if is_remote(spec.path):
        return False
    if spec.kind != "hf":
        return True
    return cfg.resolve(spec.path).exists() or any(ch in spec.path for ch in "*?[")


def _local_hf_files(cfg: LoadedConfig, spec: SourceSpec) -> tuple[str, list[str]] | None:
    if not is_local(cfg, spec):
        return None
    files = expand_inputs(cfg, spec)
    builders = {HF_BUILDERS.get(f.suffix) for f in files}
    if len(builders) != 1 or None in builders:
        kinds = ", ".join(sorted(HF_BUILDERS))
        raise DataError(f"source {spec.name!r}: local hf data files must share one type ({kinds})")
    return str(builders.pop()), [str(f) for f in files]


Reader = Callable[[Path, SourceSpec], Iterator[RawDoc]]
FILE_READERS: dict[str, Reader] = {"jsonl": read_jsonl, "parquet": read_parquet, "text": read_text}


def read_source(
    cfg: LoadedConfig, spec: SourceSpec, files: list[Path] | None, cache_dir: Path
) -> Iterator[RawDoc]:
    """Every document of a source, in a deterministic order, up to its `limit`."""
    if spec.kind == "hf":
        docs: Iterator[RawDoc] = read_hf(cfg, spec, cache_dir)
    elif spec.kind in FILE_READERS:
        reader = FILE_READERS[spec.kind]
        docs = (doc for f in files or [] for doc in reader(f, spec))
    else:  # the config model already rejects this; kept for callers that skip validation
        raise ConfigError(f"unknown source kind {spec.kind!r}")
    for n, doc in enumerate(docs):
        if spec.limit is not None and n >= spec.limit:
            return
        yield doc
