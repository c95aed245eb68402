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
from functools import partial
from pathlib import Path
from typing import IO, Any, NoReturn

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import zstandard

from corpus_assets.core.config import LoadedConfig, SourceSpec
from corpus_assets.core.errors import ConfigError, DataError, TransientError
from corpus_assets.core.store.digests import file_sha256
from corpus_assets.core.store.remote import is_remote

READ_CHUNK = 1 << 20
LINE_PIECE = 1 << 20  # a line is read whole up to this size, then a piece at a time


@dataclass(frozen=True)
class RawDoc:
    """One document as read: its id in the source (or None), text, other fields and where it is
    (`file:line`, `file: row N`), for messages."""

    source_id: str | None
    text: str
    meta: dict[str, Any]
    where: str


@dataclass
class Dropped:
    """Documents a read skipped as larger than the source's `max_document_bytes`: how many, and
    where the first one is."""

    too_large: int = 0
    first: str | None = None

    def too_large_at(self, where: str) -> None:
        self.too_large += 1
        self.first = self.first or where

    def line(self, spec: SourceSpec) -> str:
        """The one note of a source's skipped documents."""
        many = "document" if self.too_large == 1 else "documents"
        return (
            f"source {spec.name}: skipped {self.too_large:,} {many} over max_document_bytes "
            f"({spec.max_document_bytes:,} bytes); the first at {self.first}"
        )


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


def bounded_lines(fh: IO[bytes], limit: int) -> Iterator[bytes | bytearray | None]:
    """Each line of `fh` with its newline, or None for one of more than `limit` bytes (without
    its newline). Memory: the longest line of at most `limit` bytes, plus LINE_PIECE."""
    first = min(limit + 1, LINE_PIECE)
    for line in iter(partial(fh.readline, first), b""):
        if len(line) < first or line[-1] == 10:  # 10: "\n"; a short line or the file's tail
            yield line
        else:
            yield _long_line(fh, line, limit)


def _long_line(fh: IO[bytes], head: bytes, limit: int) -> bytearray | None:
    """The line that begins with `head` (read on to its newline), or None past `limit` bytes."""
    line = bytearray(head)
    del head
    while len(line) - line.endswith(b"\n") <= limit:
        if line.endswith(b"\n") or not (piece := fh.readline(LINE_PIECE)):
            return line
        line += piece
    ended = line.endswith(b"\n")
    line.clear()
    while not ended and (piece := fh.readline(LINE_PIECE)):
        ended = piece.endswith(b"\n")
    return None


def _decode(line: bytes | bytearray, path: Path, lineno: int) -> str:
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


def read_jsonl(path: Path, spec: SourceSpec, dropped: Dropped | None = None) -> Iterator[RawDoc]:
    """One document per line, of a plain or compressed file. Memory: about twice the longest
    line kept (its bytes are released once decoded, its decoded line once parsed); a line over
    `max_document_bytes` is read past in pieces, never held whole, and counted in `dropped`."""
    dropped = Dropped() if dropped is None else dropped
    with open_input(path) as fh:
        lineno = 0  # not enumerate(): its reused result tuple would hold the line's bytes
        for line in bounded_lines(fh, spec.max_document_bytes):
            lineno += 1
            if line is None:
                dropped.too_large_at(f"{path}:{lineno}")
                continue
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


def read_parquet(path: Path, spec: SourceSpec, dropped: Dropped | None = None) -> Iterator[RawDoc]:
    """One document per row; a row whose text is over `max_document_bytes` is counted in
    `dropped` (Arrow has read its row group already: the limit bounds what is kept)."""
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise DataError(f"{path}: not a readable Parquet file: {exc}") from None
    names = pf.schema_arrow.names
    if spec.text_field not in names:
        raise DataError(
            f"{path}: no column {spec.text_field!r} (text_field); columns: {', '.join(names)}"
        )
    dropped = Dropped() if dropped is None else dropped
    row = 0
    for batch in pf.iter_batches(batch_size=4096):
        sizes = _text_sizes(batch.column(spec.text_field))
        for record, size in zip(batch.to_pylist(), sizes, strict=True):
            row += 1
            if size > spec.max_document_bytes:
                dropped.too_large_at(f"{path}: row {row}")
                continue
            yield _text_of(record, spec, f"{path}: row {row}")


def _text_sizes(column: pa.Array) -> list[int]:
    """The UTF-8 bytes of each string of `column` (0 for a null or another type's value)."""
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return [0] * len(column)
    return [n or 0 for n in pc.binary_length(column).to_pylist()]


def read_text(path: Path, spec: SourceSpec, dropped: Dropped | None = None) -> Iterator[RawDoc]:
    """One document per file, or per `separator`-delimited part, streamed. Memory: about twice
    the longest part kept (its bytes are released once decoded); a part over
    `max_document_bytes` is read past, never held whole, and counted in `dropped`."""
    dropped = Dropped() if dropped is None else dropped
    line = 1
    sep = spec.separator.encode("utf-8") if spec.separator else None
    for raw in _split_file(path, sep, spec.max_document_bytes):
        if isinstance(raw, Skipped):
            dropped.too_large_at(f"{path}:{line}")
            line += raw.newlines + (spec.separator or "").count("\n")
            continue
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


@dataclass(frozen=True)
class Skipped:
    """A part over the size limit, read past: the newlines it held (for later line numbers)."""

    newlines: int


def _split_file(path: Path, sep: bytes | None, limit: int) -> Iterator[bytes | Skipped]:
    """The parts of a file between occurrences of `sep` (like `bytes.split`), read in chunks;
    a part of more than `limit` bytes is Skipped. Memory: `limit` plus a chunk.

    Splitting the UTF-8 bytes on the UTF-8 separator equals splitting the decoded text.
    """
    if not sep:
        yield _whole(path, limit)
        return
    buf = bytearray()
    skipped: int | None = None  # while a part is read past: the newlines it held so far
    with open_input(path) as fh:
        while chunk := fh.read(READ_CHUNK):
            scan = max(len(buf) - len(sep) + 1, 0)
            buf += chunk
            start = 0
            while (hit := buf.find(sep, max(scan, start))) != -1:
                if skipped is not None or hit - start > limit:
                    yield Skipped((skipped or 0) + buf.count(b"\n", start, hit))
                    skipped = None
                else:
                    with memoryview(buf) as view:  # one copy of the part, not two
                        yield bytes(view[start:hit])
                start = hit + len(sep)
            del buf[:start]
            if skipped is not None or len(buf) - len(sep) + 1 > limit:
                skipped = (skipped or 0) + _drop_all_but(buf, len(sep) - 1)
    if skipped is not None or len(buf) > limit:
        yield Skipped((skipped or 0) + buf.count(b"\n"))
    else:
        yield _drained(buf)


def _drop_all_but(buf: bytearray, keep: int) -> int:
    """Delete all but the last `keep` bytes of `buf` (a separator may begin there); the
    newlines deleted."""
    cut = len(buf) - keep
    newlines = buf.count(b"\n", 0, cut)
    del buf[:cut]
    return newlines


def _whole(path: Path, limit: int) -> bytes | Skipped:
    """The whole content of a file, or Skipped if it is over `limit` bytes."""
    buf = bytearray()
    with open_input(path) as fh:
        while chunk := fh.read(READ_CHUNK):
            buf += chunk
            if len(buf) > limit:
                buf.clear()
                while fh.read(READ_CHUNK):
                    pass
                return Skipped(0)
    return _drained(buf)


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
ZSTD_BLOCK_MAX = 128 * 1024  # what one zstd block decodes to at most
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
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
        self.cuts = _ZstdCuts()  # where the current zstd frame's blocks end

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
                self.cuts = _ZstdCuts()
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
        return self._decode_zstd()

    def _decode_zstd(self) -> bytes:
        """Decode the next blocks of a zstd frame: zstd has no output limit, so its input is cut
        where the blocks end, about OUT_PIECE of output at a time (a run-length block of four
        bytes makes 128 KiB)."""
        n = self.cuts.span(self.pending)
        if n == 0 and self._more():
            return b""
        n = n or len(self.pending)  # the file ends: the decoder says what is missing
        feed, self.pending = self.pending[:n], self.pending[n:]
        return bytes(self.decoder.decompress(feed))


class _ZstdCuts:
    """Where a zstd frame's units end (header, blocks, checksum) and what each decodes to at
    most: a raw or run-length block its size, a compressed one ZSTD_BLOCK_MAX."""

    def __init__(self) -> None:
        self.left = 0  # bytes of the current unit not yet given to the decoder
        self.state = "frame"  # the next unit: frame, block, checksum, end; rest: not cut
        self.checksum = False

    def span(self, data: bytes) -> int:
        """How many of `data`'s first bytes to decode next: whole units (the last perhaps in
        part) that make at most OUT_PIECE plus one block; 0 when more bytes are needed."""
        pos = made = 0
        while self.state != "rest":
            if self.left:
                take = min(self.left, len(data) - pos)
                pos, self.left = pos + take, self.left - take
                if self.left:
                    return pos
            if made >= OUT_PIECE:
                return pos
            unit = self._unit(data[pos : pos + 18])
            if unit is None:
                return pos
            self.left, out = unit
            made += out
        return len(data)

    def _unit(self, head: bytes) -> tuple[int, int] | None:
        """The length and largest output of the unit beginning with `head`; None if `head` is
        too short to tell or the frame has ended."""
        if self.state == "block" and len(head) >= 3:
            return self._block(int.from_bytes(head[:3], "little"))
        if self.state == "checksum":
            self.state = "end"
            return 4, 0
        if self.state == "frame" and len(head) >= 8 and _skippable(head):
            self.state = "end"  # a skippable frame (first byte 0x50-0x5f): its size follows
            return 8 + int.from_bytes(head[4:8], "little"), 0
        if self.state == "frame" and len(head) >= 5:
            return self._frame_header(head), 0
        return None

    def _frame_header(self, head: bytes) -> int:
        if head[:4] != ZSTD_MAGIC:
            self.state = "rest"  # not a frame: the decoder names what is wrong
            return 0
        fhd = head[4]  # the frame header descriptor
        single = fhd >> 5 & 1
        self.checksum = bool(fhd >> 2 & 1)
        self.state = "block"
        content_size = (single, 2, 4, 8)[fhd >> 6]
        return 5 + (1 - single) + (0, 1, 2, 4)[fhd & 3] + content_size

    def _block(self, header: int) -> tuple[int, int]:
        kind, size = header >> 1 & 3, header >> 3
        if kind == 3:  # reserved: corrupt; the decoder says so
            self.state = "rest"
            return 0, 0
        if header & 1:  # the frame's last block
            self.state = "checksum" if self.checksum else "end"
        return 3 + (1 if kind == 1 else size), ZSTD_BLOCK_MAX if kind == 2 else size


def _skippable(head: bytes) -> bool:
    """Whether `head` begins a zstd skippable frame (magic 0x184D2A50 to 0x184D2A5F)."""
    return head[0] >> 4 == 5 and head[1:4] == b"\x2a\x4d\x18"


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


Reader = Callable[[Path, SourceSpec, Dropped | None], Iterator[RawDoc]]
FILE_READERS: dict[str, Reader] = {"jsonl": read_jsonl, "parquet": read_parquet, "text": read_text}


def read_source(
    cfg: LoadedConfig,
    spec: SourceSpec,
    files: list[Path] | None,
    cache_dir: Path,
    dropped: Dropped | None = None,
) -> Iterator[RawDoc]:
    """Every document of a source, in a deterministic order, up to its `limit`; the documents
    over its `max_document_bytes` are skipped and counted in `dropped`."""
    dropped = Dropped() if dropped is None else dropped
    if spec.kind == "hf":
        docs: Iterator[RawDoc] = _bounded(read_hf(cfg, spec, cache_dir), spec, dropped)
    elif spec.kind in FILE_READERS:
        reader = FILE_READERS[spec.kind]
        docs = (doc for f in files or [] for doc in reader(f, spec, dropped))
    else:  # the config model already rejects this; kept for callers that skip validation
        raise ConfigError(f"unknown source kind {spec.kind!r}")
    for n, doc in enumerate(docs):
        if spec.limit is not None and n >= spec.limit:
            return
        yield doc


def _bounded(docs: Iterator[RawDoc], spec: SourceSpec, dropped: Dropped) -> Iterator[RawDoc]:
    """`docs` without those whose text is over `max_document_bytes` (counted in `dropped`)."""
    limit = spec.max_document_bytes
    for doc in docs:
        if len(doc.text) * 4 > limit and _utf8_size(doc.text) > limit:
            dropped.too_large_at(doc.where)
            continue
        yield doc


def _utf8_size(text: str, chunk: int = 1 << 20) -> int:
    """len(text.encode("utf-8")) without a copy of a long text (a chunk at a time)."""
    if text.isascii():
        return len(text)
    return sum(len(text[i : i + chunk].encode("utf-8")) for i in range(0, len(text), chunk))
