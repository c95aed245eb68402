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
from filelock import FileLock
lock = FileLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _hold_elsewhere(path: Path, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def test_a_waiting_lock_keeps_reporting(tmp_path: Path) -> None:
    """A fetch waiting for another build's fetch of a shared source must still heartbeat."""
    path = tmp_path / "locks" / "src.lock"
    path.parent.mkdir()
    holder = _hold_elsewhere(path, 1.5)
    notes: list[str] = []
    start = time.monotonic()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(locks, "WAIT_NOTE_S", 0.2)
            with locks.hold(path, "raw cache of source 'src'", waiting=notes.append):
                waited = time.monotonic() - start  # we got it only once the holder let go
    finally:
        holder.kill()
        holder.wait()
    assert waited > 1.0
    assert len(notes) >= 3
    assert notes[0] == "waiting for raw cache of source 'src': locked by another process"


def test_a_lock_held_too_long_is_transient(tmp_path: Path) -> None:
    path = tmp_path / "src.lock"
    holder = _hold_elsewhere(path, 30)
    try:
        with (
            pytest.raises(TransientError, match="locked by another process"),
            locks.hold(path, "the raw ledger", timeout=0.3),
        ):
            pass
    finally:
        holder.kill()
        holder.wait()
