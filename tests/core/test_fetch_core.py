"""fetch internals in-process: streaming text reader, hf error mapping, ledger, preflight."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corpus_assets.core.config import SourceSpec, load_config, validate
from corpus_assets.core.errors import ConfigError, DataError, TransientError
from corpus_assets.core.stages.fetch import fetch
from corpus_assets.core.store import ledger, locks, sources
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.progress import Progress, silent

WriteConfig = Callable[[Path, Mapping[str, Any]], Path]
EOT = "<|endoftext|>"


def _text_spec(separator: str | None) -> SourceSpec:
    return SourceSpec(name="t", kind="text", path="x.txt", license="mit", separator=separator)


def _reference_split(text: str, separator: str | None) -> list[str]:
    """What the text reader must yield: the file split on the separator, stripped, non-empty."""
    parts = text.split(separator) if separator else [text]
    return [p.strip() for p in parts if p.strip()]


@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(st.text(alphabet="ab \n<|>é😀", max_size=12), max_size=12),
    separator=st.sampled_from([EOT, "\n\n", "ab", "é", "😀<", None]),
    chunk=st.integers(min_value=1, max_value=16),
)
def test_text_reader_streams_the_same_documents_as_a_whole_file_split(
    tmp_path_factory: pytest.TempPathFactory,
    pieces: list[str],
    separator: str | None,
    chunk: int,
) -> None:
    text = (separator or "").join(pieces)
    path = tmp_path_factory.mktemp("text") / "x.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sources, "READ_CHUNK", chunk)  # separators straddle chunk boundaries
        got = [d.text for d in sources.read_text(path, _text_spec(separator))]
    assert got == _reference_split(text, separator)


def test_text_reader_reports_the_line_of_a_bad_byte(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_bytes(b"one\n" + EOT.encode() + b"\ntwo\n" + EOT.encode() + b"\n\nthr\xffee\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sources, "READ_CHUNK", 3)
        with pytest.raises(DataError, match=r"x\.txt:6: not valid UTF-8 \(byte 0xff\)"):
            list(sources.read_text(path, _text_spec(EOT)))


def test_text_reader_memory_is_bounded_by_one_document(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    story = "Once upon a time there was a little test. " * 25  # ~1 kB per document
    with open(path, "w", encoding="utf-8") as fh:
        for _ in range(24_000):  # ~26 MB
            fh.write(story + EOT + "\n")
    size = path.stat().st_size
    tracemalloc.start()
    try:
        count = sum(1 for _ in sources.read_text(path, _text_spec(EOT)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 24_000
    assert peak < size / 4, f"peak {peak / 1e6:.1f} MB for a {size / 1e6:.1f} MB file"


def _hf_cfg(tmp_path: Path) -> tuple[Any, SourceSpec]:
    raw = {
        "dataset": "d",
        "version": "v1",
        "tokenizer": {"id": "bytes"},
        "sources": [{"name": "hub", "kind": "hf", "path": "org/name", "license": "mit"}],
    }
    cfg = validate(raw, tmp_path)
    return cfg, cfg.model.sources[0]


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (ConnectionError("Couldn't reach 'org/name' on the Hub"), TransientError),
        (TimeoutError("read timed out"), TransientError),
        (OSError("connection reset"), TransientError),
        (FileNotFoundError("Dataset 'org/name' doesn't exist on the Hub"), DataError),
        (ValueError("Unknown split 'train'"), DataError),
    ],
)
def test_hf_errors_map_to_retry_or_give_up(
    tmp_path: Path, raised: Exception, expected: type[Exception]
) -> None:
    """A missing hub dataset will not appear on retry (65); an unreachable hub may (75)."""
    import datasets

    cfg, spec = _hf_cfg(tmp_path)

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise raised

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(datasets, "load_dataset", fail)
        with pytest.raises(expected) as info:
            list(sources.read_hf(cfg, spec, tmp_path / "cache"))
    assert "org/name" in str(info.value)


def test_hf_local_glob_is_local(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    raw = {
        "dataset": "d",
        "version": "v1",
        "tokenizer": {"id": "bytes"},
        "sources": [
            {"name": "g", "kind": "hf", "path": "*.jsonl", "license": "mit"},
            {"name": "f", "kind": "hf", "path": "a.jsonl", "license": "mit"},
            {"name": "h", "kind": "hf", "path": "org/name", "license": "mit"},
        ],
    }
    cfg = validate(raw, tmp_path)
    assert [sources.is_local(cfg, s) for s in cfg.model.sources] == [True, True, False]


def test_ledger_keeps_one_line_per_identical_entry_and_clears_stale_temps(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.raw.mkdir()
    stale = layout.raw / ".LEDGER.jsonl.tmp-999999"
    stale.write_bytes(b"half a line")
    entry = {"source_key": "s-0123456789ab", "documents": 3, "files": []}
    ledger.record(layout, entry)
    ledger.record(layout, dict(entry))
    assert not stale.exists()
    lines = layout.ledger.read_text().splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0])["documents"] == 3
    ledger.record(layout, {**entry, "documents": 4})  # a different result is a new line
    assert len(layout.ledger.read_text().splitlines()) == 2
    assert ledger.read(layout)["s-0123456789ab"]["documents"] == 4


def test_ledger_names_a_corrupt_line(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.raw.mkdir()
    layout.ledger.write_text('{"source_key": "a", "documents": 1, "files": []}\n{not json\n')
    with pytest.raises(DataError, match=r"LEDGER\.jsonl:2: corrupt ledger line"):
        ledger.read(layout)


def test_every_input_is_checked_before_any_source_is_fetched(
    tmp_path: Path, write_config: WriteConfig
) -> None:
    (tmp_path / "good.jsonl").write_text('{"text": "fine"}\n')
    cfg_path = write_config(
        tmp_path / "c.json",
        {
            "dataset": "d",
            "version": "v1",
            "tokenizer": {"id": "bytes"},
            "sources": [
                {"name": "good", "kind": "jsonl", "path": "good.jsonl", "license": "mit"},
                {"name": "typo", "kind": "jsonl", "path": "god.jsonl", "license": "mit"},
            ],
        },
    )
    layout = Layout(tmp_path / "root")
    with pytest.raises(ConfigError, match="'typo': input not found"):
        fetch(load_config(cfg_path), layout, Progress("fetch", silent))
    assert not layout.raw.exists()


HOLDER = """
import sys, time
from pathlib import Path
from corpus_assets.core.store.locks import hold
with hold(Path(sys.argv[1]), "the test's hold"):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _hold_elsewhere(path: Path, seconds: float) -> subprocess.Popen[str]:
    """Another process holding the lock at `path` for `seconds`, once it holds it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def test_a_waiting_lock_keeps_reporting(tmp_path: Path) -> None:
    """A fetch waiting for another build's fetch of a shared source must still heartbeat."""
    path = tmp_path / "locks" / "src.lock"
    holder = _hold_elsewhere(path, 1.5)
    notes: list[str] = []
    start = time.monotonic()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(locks, "WAIT_NOTE_S", 0.2)
            with locks.hold(path, "the raw cache of source 'src'", waiting=notes.append):
                waited = time.monotonic() - start  # we got it only once the holder let go
    finally:
        holder.kill()
        holder.wait()
    assert waited > 1.0
    assert len(notes) >= 3
    assert notes[0].startswith(
        f"waiting for the raw cache of source 'src': held by pid {holder.pid} on "
    )


@pytest.mark.timeout(60)
def test_a_fetch_waits_for_a_live_holder_of_its_raw_cache_and_names_it(
    tmp_path: Path, write_config: WriteConfig
) -> None:
    """No deadline on a live holder: the fetch waits, naming it, then fetches (no error)."""
    (tmp_path / "a.jsonl").write_text('{"text": "one"}\n{"text": "two"}\n')
    source = {"name": "web", "kind": "jsonl", "path": "a.jsonl", "license": "mit"}
    cfg = load_config(
        write_config(
            tmp_path / "c.json",
            {"dataset": "d", "version": "v1", "tokenizer": {"id": "bytes"}, "sources": [source]},
        )
    )
    layout = Layout(tmp_path / "root")
    lock = layout.raw_lock(cfg.source_key(cfg.model.sources[0]))
    holder = _hold_elsewhere(lock, 3.0)
    lines: list[str] = []
    start = time.monotonic()
    try:
        fetch(cfg, layout, Progress("fetch", lines.append))
        waited = time.monotonic() - start
    finally:
        holder.kill()
        holder.wait()
    assert waited > 2.5  # it took the lock once the holder ended, and fetched
    assert ledger.read(layout)[cfg.source_key(cfg.model.sources[0])]["documents"] == 2
    waiting = [line for line in lines if "waiting for" in line]
    assert waiting and waiting[0].startswith(
        f"fetch: waiting for the raw cache of source 'web': held by pid {holder.pid} on "
    ), lines


# Documents over `max_document_bytes`: read past in bounded memory, counted, the first named.


def _reference_lines(data: bytes, limit: int) -> list[bytes | None]:
    """What `bounded_lines` must yield: each line, None for one over `limit` bytes."""
    parts = data.split(b"\n")  # only "\n" ends a line (not "\r", as splitlines has it)
    lines = [part + b"\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    return [None if len(line.removesuffix(b"\n")) > limit else line for line in lines]


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")), max_size=8),
    tail=st.booleans(),
    limit=st.integers(min_value=1, max_value=10),
    piece=st.integers(min_value=1, max_value=6),
)
def test_bounded_lines_yield_each_line_or_none_past_the_limit(
    lines: list[bytes], tail: bool, limit: int, piece: int
) -> None:
    from io import BytesIO

    data = b"\n".join(lines) + (b"" if tail else b"\n") if lines else b""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sources, "LINE_PIECE", piece)  # lines longer than a piece, and shorter
        got = list(sources.bounded_lines(BytesIO(data), limit))
    assert [bytes(x) if x is not None else None for x in got] == _reference_lines(data, limit)


@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(st.text(alphabet="ab \n<|>é", max_size=14), max_size=10),
    separator=st.sampled_from([EOT, "\n\n", "ab", "é", None]),
    chunk=st.integers(min_value=1, max_value=16),
    limit=st.integers(min_value=1, max_value=12),
)
def test_text_reader_skips_the_parts_over_the_limit_and_counts_them(
    tmp_path_factory: pytest.TempPathFactory,
    pieces: list[str],
    separator: str | None,
    chunk: int,
    limit: int,
) -> None:
    text = (separator or "").join(pieces)
    path = tmp_path_factory.mktemp("text") / "x.txt"
    path.write_text(text, encoding="utf-8")
    parts = text.split(separator) if separator else [text]
    large = [p for p in parts if len(p.encode("utf-8")) > limit]
    spec = _text_spec(separator).model_copy(update={"max_document_bytes": limit})
    dropped = sources.Dropped()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sources, "READ_CHUNK", chunk)  # parts and separators straddle chunks
        got = [d.text for d in sources.read_text(path, spec, dropped)]
    kept = [p.strip() for p in parts if len(p.encode("utf-8")) <= limit and p.strip()]
    assert got == kept
    assert dropped.too_large == len(large)


def test_text_reader_counts_the_lines_of_a_skipped_part(tmp_path: Path) -> None:
    """Line numbers after a skipped part still count its lines (a bad byte is named right)."""
    path = tmp_path / "x.txt"
    big = b"\n".join([b"a long line of the skipped part"] * 5)
    path.write_bytes(b"one\n" + EOT.encode() + big + EOT.encode() + b"\nth\xffree\n")
    spec = _text_spec(EOT).model_copy(update={"max_document_bytes": 100})
    dropped = sources.Dropped()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sources, "READ_CHUNK", 7)
        with pytest.raises(DataError, match=r"x\.txt:7: not valid UTF-8 \(byte 0xff\)"):
            list(sources.read_text(path, spec, dropped))
    assert (dropped.too_large, dropped.first) == (1, f"{path}:2")


def _zstd_bomb(path: Path, mb: int) -> Path:
    """`mb` MB of one repeated byte in one zstd frame of a few KB."""
    from zstandard import ZstdCompressor

    with open(path, "wb") as raw, ZstdCompressor().stream_writer(raw) as out:
        for _ in range(mb):
            out.write(b"a" * (1 << 20))
    return path


@pytest.mark.timeout(60)
def test_zstd_decoding_makes_a_bounded_output_at_a_time(tmp_path: Path) -> None:
    """A few KB of zstd that expand to 64 MB are decoded with a small peak (Python's heap)."""
    path = _zstd_bomb(tmp_path / "bomb.zst", 64)
    assert path.stat().st_size < 10_000
    tracemalloc.start()
    try:
        total = 0
        with sources.open_input(path) as fh:
            while piece := fh.read(1 << 20):
                total += len(piece)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total == 64 << 20
    assert peak < 4 << 20, f"peak {peak / 2**20:.1f} MiB decoding a 64 MiB zstd bomb"


@pytest.mark.timeout(60)
def test_jsonl_reader_skips_a_zstd_bomb_line_without_holding_it(tmp_path: Path) -> None:
    from zstandard import ZstdCompressor

    path = tmp_path / "docs.jsonl.zst"
    with open(path, "wb") as raw, ZstdCompressor().stream_writer(raw) as out:
        out.write(b'{"text": "before"}\n{"text": "')
        for _ in range(64):
            out.write(b"a" * (1 << 20))
        out.write(b'"}\n{"text": "after"}\n')
    spec = SourceSpec(name="j", kind="jsonl", path="x", license="mit", max_document_bytes=8 << 20)
    dropped = sources.Dropped()
    tracemalloc.start()
    try:
        texts = [d.text for d in sources.read_jsonl(path, spec, dropped)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert texts == ["before", "after"]
    assert (dropped.too_large, dropped.first) == (1, f"{path}:2")
    assert peak < 2 * (8 << 20), f"peak {peak / 2**20:.1f} MiB with an 8 MiB limit"


def test_parquet_reader_drops_values_over_the_limit_by_their_utf8_bytes(tmp_path: Path) -> None:
    from pyarrow import table
    from pyarrow.parquet import write_table

    path = tmp_path / "x.parquet"
    texts = ["short", "é" * 6, "x" * 12, "ok"]  # "é" * 6 is 12 bytes in 6 characters
    write_table(table({"text": texts}), path)
    spec = SourceSpec(name="p", kind="parquet", path="x", license="mit", max_document_bytes=11)
    dropped = sources.Dropped()
    got = [d.text for d in sources.read_parquet(path, spec, dropped)]
    assert got == ["short", "ok"]
    assert (dropped.too_large, dropped.first) == (2, f"{path}: row 2")


def test_a_config_without_max_document_bytes_keeps_its_canonical_form(tmp_path: Path) -> None:
    """The new setting's default is not written into the identity (canonical form as written)."""
    source = {"name": "s", "kind": "jsonl", "path": "a.jsonl", "license": "mit"}
    raw = {"dataset": "d", "version": "v1", "tokenizer": {"id": "bytes"}, "sources": [source]}
    cfg = validate(raw, tmp_path)
    assert cfg.model.sources[0].max_document_bytes == 64 * 1024 * 1024
    assert b"max_document_bytes" not in cfg.canonical
    limited = validate({**raw, "sources": [{**source, "max_document_bytes": 1024}]}, tmp_path)
    assert limited.sha256 != cfg.sha256
