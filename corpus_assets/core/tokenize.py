"""The tokenize stage: every shard to one `.bin`/`.idx` token file pair, in parallel, resumable.

Files (all little-endian), one pair per shard `shard-NNNNN.parquet`:
- `shard-NNNNN.bin`: the token ids of every document in shard order, each followed by EOS;
  uint16 when the vocabulary (EOS included) has at most 65,536 ids, else uint32.
- `shard-NNNNN.idx`: uint64, one per document: the cumulative END offset (in tokens, EOS
  included) of that document in the `.bin`; document i is `bin[idx[i-1]:idx[i]]` (0 for i=0).

`_MANIFEST.json` (kind `tokens`) records build id, config sha256, the tokenizer identity
(`tokenizer: {id, sha256}`; sha256 of its tokenizer.json, null for `bytes`), `vocab_size`, `dtype`,
`eos_id`, `files` (one entry per `.bin` and per `.idx`: name, shard, sha256, bytes, tokens,
documents), `totals` (documents, tokens), the shards manifest it was built from (`shards_manifest`,
relative to this folder) and its sha256. No timestamps or worker counts: byte-identical builds.

Work happens under `work/<hash12>/tokenize/`: `out/` is the staging folder that is published,
`markers/<stem>.json` says a shard's pair is complete (written after its files are durable), so
a killed stage redoes only unfinished shards.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import (
    FIRST_COMPLETED,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    wait,
)
from concurrent.futures.process import BrokenProcessPool
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from corpus_assets.core.atomic import MANIFEST, atomic_writer, publish_dir, remove_tree, write_json
from corpus_assets.core.config import LoadedConfig
from corpus_assets.core.errors import CorpusError, DataError
from corpus_assets.core.layout import Layout
from corpus_assets.core.locks import hold
from corpus_assets.core.progress import Progress
from corpus_assets.core.tokenizer import (
    DTYPES,
    Encoder,
    TokenizerInfo,
    load_encoder,
    resolve_tokenizer,
    text_sizes,
)
from corpus_assets.core.verify import verify_files
from corpus_assets.core.version import CODE_VERSION

IDX_DTYPE = np.dtype("<u8")
LOCK_WAIT_S = 10.0
POLL_S = 1.0
Report = Callable[[int, int], None]  # (documents, text bytes) done
THREADS_PER_PROCESS = 4  # encoding threads one process of ours drives (see plan)
PARALLELISM_ENV = "TOKENIZERS_PARALLELISM"  # the library's own threads: off, we run ours
TEXT_BATCH_BYTES = 4 << 20  # per encode call: bounds the tokenizer's memory


@dataclass(frozen=True)
class TokenizeResult:
    """What the stage built: counts, token format and the manifest (relative to the data root)."""

    documents: int
    tokens: int
    shards: int
    tokenizer: str
    vocab_size: int
    eos_id: int
    dtype: str
    manifest: str


@dataclass(frozen=True)
class ShardsInput:
    """The verified shards manifest the stage reads."""

    folder: Path
    sha256: str
    shards: list[dict[str, Any]]


def tokenize(cfg: LoadedConfig, layout: Layout, workers: int, progress: Progress) -> TokenizeResult:
    """Tokenize every shard of the build and publish the token files with their manifest."""
    info = resolve_tokenizer(cfg)
    shards = read_shards(layout.shards(cfg))
    final = layout.tokens(cfg)
    work = layout.work(cfg, "tokenize")
    with hold(work.parent / "tokenize.lock", f"tokenize stage of {cfg.build_id}", LOCK_WAIT_S):
        published = _published(final, shards, info)
        out, markers = work / "out", work / "markers"
        if published is not None:
            remove_tree(work)  # left if a run was killed right after publishing
            progress.note(f"tokens already built in {final.relative_to(layout.root)}")
            return _result(layout, final, published)
        out.mkdir(parents=True, exist_ok=True)
        markers.mkdir(parents=True, exist_ok=True)
        tasks = [_task(cfg, info, shards, entry, out, markers) for entry in shards.shards]
        pending = [t for t in tasks if read_marker(t) is None]
        if len(pending) < len(tasks):
            progress.note(f"resuming: {len(tasks) - len(pending)} of {len(tasks)} shards done")
        _run(pending, workers, progress)
        stats = [read_marker(t, check_files=False) for t in tasks]
        if any(s is None for s in stats):  # a marker vanished under us: someone else is here
            raise CorpusError(f"tokenize staging {work} changed during the run; run it again")
        files = [f for s in stats if s is not None for f in s["files"]]
        _sweep(out, {f["name"] for f in files})
        doc = _manifest(cfg, info, shards, files, os.path.relpath(shards.folder, final))
        write_json(out / MANIFEST, doc)
        publish_dir(out, final)
        remove_tree(work)
    progress.done()
    return _result(layout, final, doc)


def read_shards(folder: Path) -> ShardsInput:
    """The shards manifest of the build, every shard verified against it (else DataError)."""
    path = folder / MANIFEST
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"no shards manifest at {path}: run the shard stage first") from None
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("kind") != "shards":
        raise DataError(f"{path}: not a shards manifest (kind {_kind(doc)!r})")
    shards = doc.get("shards")
    if not isinstance(shards, list):
        raise DataError(f"{path}: has no 'shards' list")
    problems = verify_files(folder, shards)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise DataError(f"shards do not match their manifest: {'; '.join(problems[:3])}{more}")
    return ShardsInput(folder, hashlib.sha256(raw).hexdigest(), shards)


def _kind(doc: Any) -> Any:
    return doc.get("kind") if isinstance(doc, dict) else type(doc).__name__


def _task(
    cfg: LoadedConfig,
    info: TokenizerInfo,
    shards: ShardsInput,
    entry: dict[str, Any],
    out: Path,
    markers: Path,
) -> ShardTask:
    stem = Path(entry["name"]).stem
    return ShardTask(
        shard=entry["name"],
        shard_path=str(shards.folder / entry["name"]),
        shard_sha256=entry["sha256"],
        rows=int(entry["rows"]),
        size=int(entry["bytes"]),
        out_dir=str(out),
        marker=str(markers / f"{stem}.json"),
        tokenizer=info,
        batch_size=cfg.model.tokenizer.batch_size,
    )


def _published(final: Path, shards: ShardsInput, info: TokenizerInfo) -> dict[str, Any] | None:
    """The published manifest, if it is whole, built from these shards and verifies."""
    try:
        doc = json.loads((final / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("shards_manifest_sha256") != shards.sha256:
        return None
    built = {**doc.get("tokenizer", {}), **{k: doc.get(k) for k in ("vocab_size", "eos_id")}}
    want = {k: v for k, v in info.identity().items() if k != "dtype"}
    if built != want:
        raise DataError(
            f"{final} was built with tokenizer {built}, but the config's tokenizer is now {want} "
            "(its file changed?); run `corpus cleanup` for this build, or give it a new version"
        )
    return None if verify_files(final, doc.get("files", [])) else doc


def _run(tasks: list[ShardTask], workers: int, progress: Progress) -> None:
    """Run shard tasks, largest first, on `workers` cores; progress from their reports."""
    if not tasks:
        return
    order = sorted(tasks, key=lambda t: (-t.size, t.shard))
    procs, threads = plan(tasks[0].tokenizer, workers, len(order))
    if procs > 1:
        _run_pool(order, procs, threads, progress)
        return
    saved = os.environ.get(PARALLELISM_ENV)  # in this process: no start-up cost
    os.environ[PARALLELISM_ENV] = "false"
    try:
        run_tasks(order, progress.add, threads)
    finally:
        if saved is None:
            del os.environ[PARALLELISM_ENV]
        else:
            os.environ[PARALLELISM_ENV] = saved


def plan(info: TokenizerInfo, workers: int, shards: int) -> tuple[int, int]:
    """(processes, encoding threads per process) for `workers` cores; never more processes
    than shards.

    A `tokenizers` tokenizer releases the GIL while it encodes, so one process runs up to
    THREADS_PER_PROCESS encoding threads (each encodes whole batches, the library's own threads
    off) while its main thread turns finished batches into ids and writes them. On 2 cores this
    was at least as fast as the library's own threads (whose batch-end waits it avoids, and
    whose Python work it overlaps) and clearly faster than 2 worker processes, which pay
    start-up and run their Python work on the same cores (bench/bench_tokenize.py
    --compare-modes). `bytes` is numpy work under the GIL: one process per core.
    """
    if info.id == "bytes":
        return max(1, min(shards, workers)), 1
    procs = max(1, min(shards, -(-workers // THREADS_PER_PROCESS)))
    return procs, max(1, workers // procs)


def _run_pool(tasks: list[ShardTask], procs: int, threads: int, progress: Progress) -> None:
    ctx = multiprocessing.get_context("spawn")
    shared = _Shared(ctx.Queue(), ctx.Event(), threads)
    initargs = (shared, os.getpid())
    pool = ProcessPoolExecutor(procs, ctx, initializer=_init_worker, initargs=initargs)
    try:
        futures: set[Future[None]] = {pool.submit(run_task, t) for t in tasks}
        while futures:
            finished, futures = wait(futures, timeout=POLL_S, return_when=FIRST_COMPLETED)
            _drain(shared.reports, progress)
            for future in finished:
                future.result()
    except BrokenProcessPool as exc:
        shared.stop.set()
        raise CorpusError(f"a tokenize worker died ({exc}); run the stage again") from None
    except BaseException:
        shared.stop.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _drain(shared.reports, progress)
        shared.reports.close()


def _drain(reports: Any, progress: Progress) -> None:
    docs = nbytes = 0
    while True:
        try:
            d, b = reports.get_nowait()
        except Exception:  # queue.Empty, or closed by a dead worker
            break
        docs += d
        nbytes += b
    progress.add(docs, nbytes)  # also a heartbeat when nothing finished


def _sweep(out: Path, keep: set[str]) -> None:
    """Delete what a killed run left in staging (temp files, files of no current shard)."""
    for path in out.iterdir():
        if path.name in keep:
            continue
        if path.is_dir():
            remove_tree(path)
        else:
            path.unlink()


def _manifest(
    cfg: LoadedConfig,
    info: TokenizerInfo,
    shards: ShardsInput,
    files: list[dict[str, Any]],
    shards_rel: str,
) -> dict[str, Any]:
    bins = [f for f in files if f["name"].endswith(".bin")]
    return {
        "kind": "tokens",
        "build_id": cfg.build_id,
        "stage_key": cfg.stage_key("tokenize"),
        "config_sha256": cfg.sha256,
        "tokenizer": {"id": info.id, "sha256": info.sha256},
        "vocab_size": info.vocab_size,
        "eos_id": info.eos_id,
        "dtype": info.dtype,
        "idx_dtype": "uint64",
        "byte_order": "little",
        "files": files,
        "totals": {
            "documents": sum(f["documents"] for f in bins),
            "tokens": sum(f["tokens"] for f in bins),
        },
        "shards_manifest": f"{shards_rel}/{MANIFEST}",
        "shards_manifest_sha256": shards.sha256,
        "code_version": CODE_VERSION,
    }


def _result(layout: Layout, final: Path, doc: dict[str, Any]) -> TokenizeResult:
    return TokenizeResult(
        documents=doc["totals"]["documents"],
        tokens=doc["totals"]["tokens"],
        shards=sum(1 for f in doc["files"] if f["name"].endswith(".bin")),
        tokenizer=doc["tokenizer"]["id"],
        vocab_size=doc["vocab_size"],
        eos_id=doc["eos_id"],
        dtype=doc["dtype"],
        manifest=str((final / MANIFEST).relative_to(layout.root)),
    )


# --- shards, in this process or in a pool worker ----------------------------------------------


@dataclass(frozen=True)
class ShardTask:
    """One shard to tokenize into `<stem>.bin` / `<stem>.idx` in `out_dir`, then mark done."""

    shard: str
    shard_path: str
    shard_sha256: str
    rows: int
    size: int
    out_dir: str
    marker: str
    tokenizer: TokenizerInfo
    batch_size: int

    def key(self) -> dict[str, Any]:
        """What the pair's bytes depend on: a marker with another key is stale."""
        return {
            "shard": self.shard,
            "shard_sha256": self.shard_sha256,
            "rows": self.rows,
            "tokenizer": self.tokenizer.identity(),
        }


def read_marker(task: ShardTask, check_files: bool = True) -> dict[str, Any] | None:
    """The completion marker of `task` if it is current and (checked) its files are intact."""
    try:
        doc = json.loads(Path(task.marker).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("key") != task.key():
        return None
    if check_files and verify_files(Path(task.out_dir), doc["files"]):
        return None
    return doc


@dataclass(frozen=True)
class _Shared:
    """What the stage shares with its pool workers: progress reports, a stop flag, threads."""

    reports: Any  # multiprocessing Queue of (documents, text bytes)
    stop: Any  # multiprocessing Event: another shard failed
    threads: int  # encoding threads per worker


_shared: _Shared | None = None
_encoder: tuple[TokenizerInfo, Encoder] | None = None


def _init_worker(shared: _Shared, parent_pid: int) -> None:
    """Die with the stage process; encode on our threads, not the library's."""
    global _shared
    _shared = shared
    if sys.platform.startswith("linux"):  # PR_SET_PDEATHSIG: killed the instant the stage dies
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()
    os.environ[PARALLELISM_ENV] = "false"


def _exit_when_orphaned(parent_pid: int) -> None:
    """Elsewhere (and as a backstop): an orphaned worker must not keep writing into staging."""
    while os.getppid() == parent_pid:
        time.sleep(0.5)
    os._exit(1)


def run_task(task: ShardTask) -> None:
    """In a pool worker: one shard, progress through the queue shared with the stage."""
    run_tasks([task], _to_stage, _shared.threads if _shared is not None else 1)


def run_tasks(tasks: list[ShardTask], report: Report, threads: int) -> None:
    """Tokenize shards in order, each into its file pair (atomically), then write its marker.

    One stream of batches runs through `threads` encoding threads across shard boundaries, so
    the threads stay busy while a shard's last batch is finished and its files are closed.
    """
    global _encoder
    if not tasks:
        return
    info = tasks[0].tokenizer
    if _encoder is None or _encoder[0] != info:
        _encoder = (info, load_encoder(info))
    with closing(_encoded(_batches_of(tasks), _encoder[1], threads)) as stream:
        for task in tasks:
            out, stem = Path(task.out_dir), Path(task.shard).stem
            batches = _until_end(stream)
            files = _write_pair(task, batches, out / f"{stem}.bin", out / f"{stem}.idx", report)
            write_json(Path(task.marker), {"key": task.key(), "files": files})


_END: tuple[None, None, int] = (None, None, 0)  # closes one shard's batches in the stream


def _batches_of(tasks: list[ShardTask]) -> Iterator[tuple[Any, int]]:
    for task in tasks:
        yield from _text_batches(task)
        yield None, 0


def _until_end(stream: Iterator[Any]) -> Iterator[Any]:
    """The stream's items up to (not including) the next `_END`; the rest stays in `stream`."""
    for item in stream:
        if item is _END:
            return
        yield item


def _encoded(
    batches: Iterator[tuple[Any, int]], encoder: Encoder, threads: int
) -> Generator[Any, None, None]:
    """(ids, lengths, text bytes) per batch, in order, `_END` for a `None` batch; up to
    `threads` batches encode at once on helper threads while this one finishes the oldest."""
    if threads == 1:
        for texts, nbytes in batches:
            _next_batch()
            yield _END if texts is None else (*encoder.encode(texts), nbytes)
        return
    with ThreadPoolExecutor(threads, thread_name_prefix="encode") as pool:
        window: deque[tuple[Future[Any] | None, int]] = deque()
        running = 0
        for texts, nbytes in batches:
            _next_batch()
            if texts is None:
                window.append((None, 0))
            else:
                window.append((pool.submit(encoder.start, texts), nbytes))
                running += 1
            while window and (window[0][0] is None or running > threads):
                item = window.popleft()
                if item[0] is not None:
                    running -= 1
                yield _finished(item, encoder)
        while window:
            yield _finished(window.popleft(), encoder)


def _finished(item: tuple[Future[Any] | None, int], encoder: Encoder) -> tuple[Any, ...]:
    started, nbytes = item
    return _END if started is None else (*encoder.finish(started.result()), nbytes)


def _next_batch() -> None:
    """In a pool worker: stop when another shard failed."""
    if _shared is not None and _shared.stop.is_set():
        raise CorpusError("stopped: another shard failed")


def _to_stage(docs: int, nbytes: int) -> None:
    if _shared is not None:
        _shared.reports.put((docs, nbytes))


def _write_pair(
    task: ShardTask, batches: Iterator[Any], bin_path: Path, idx_path: Path, report: Report
) -> list[dict[str, Any]]:
    dtype = DTYPES[task.tokenizer.dtype]
    bin_hash, idx_hash = hashlib.sha256(), hashlib.sha256()
    tokens = docs = 0
    with atomic_writer(bin_path) as fb, atomic_writer(idx_path) as fi:
        for ids, lengths, nbytes in batches:
            assert ids.dtype == dtype, (ids.dtype, dtype)
            _write(fb, bin_hash, ids)
            _write(fi, idx_hash, (np.cumsum(lengths) + tokens).astype(IDX_DTYPE))
            tokens += int(ids.size)
            docs += int(lengths.size)
            report(int(lengths.size), nbytes)
        if docs != task.rows:
            raise DataError(f"{task.shard}: read {docs} rows, the shards manifest says {task.rows}")
        fb_size, fi_size = fb.tell(), fi.tell()
    common = {"shard": task.shard, "tokens": tokens, "documents": docs}
    return [
        {"name": bin_path.name, **common, "sha256": bin_hash.hexdigest(), "bytes": fb_size},
        {"name": idx_path.name, **common, "sha256": idx_hash.hexdigest(), "bytes": fi_size},
    ]


def _write(fh: IO[bytes], digest: Any, array: np.ndarray[Any, Any]) -> None:
    view = np.ascontiguousarray(array).data.cast("B")
    digest.update(view)
    fh.write(view)


def _text_batches(task: ShardTask) -> Iterator[tuple[Any, int]]:
    """The shard's `text` column in batches of at most `batch_size` rows and about
    TEXT_BATCH_BYTES of text (one long document may exceed it), with their UTF-8 size."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with pq.ParquetFile(task.shard_path, buffer_size=1 << 20, pre_buffer=False) as pf:
            if "text" not in pf.schema_arrow.names:
                raise DataError(f"shard {task.shard} has no 'text' column")
            for batch in pf.iter_batches(task.batch_size, columns=["text"], use_threads=False):
                texts = batch.column(0)
                if texts.null_count:
                    raise DataError(f"shard {task.shard} has a row with no text")
                yield from _by_size(texts, TEXT_BATCH_BYTES)
    except pa.ArrowException as exc:
        raise DataError(f"cannot read shard {task.shard}: {exc}") from None


def _by_size(texts: Any, limit: int) -> Iterator[tuple[Any, int]]:
    """Consecutive slices of `texts` holding about `limit` UTF-8 bytes each (at least one row)."""
    ends = np.cumsum(text_sizes(texts))
    start, done = 0, 0
    while start < len(texts):
        stop = max(start + 1, int(np.searchsorted(ends, done + limit, side="right")))
        yield texts.slice(start, stop - start), int(ends[stop - 1]) - done
        start, done = stop, int(ends[stop - 1])


# --- corpus verify ----------------------------------------------------------------------------


def verify_tokens(path: Path, doc: dict[str, Any]) -> list[str]:
    """Problems of a token build: digests, sizes, dtype, EOS placement, shard rows."""
    folder = path.parent
    files = doc.get("files", [])
    problems = verify_files(folder, files)
    dtype_name = doc.get("dtype")
    vocab, eos = doc.get("vocab_size"), doc.get("eos_id")
    if dtype_name not in DTYPES or not isinstance(vocab, int) or not isinstance(eos, int):
        return [*problems, f"{path}: bad dtype/vocab_size/eos_id: {dtype_name!r}, {vocab}, {eos}"]
    expected = "uint16" if vocab <= 65_536 else "uint32"
    if dtype_name != expected:
        problems.append(f"{path}: dtype {dtype_name} but vocab_size {vocab} needs {expected}")
    if not 0 <= eos < vocab:
        problems.append(f"{path}: eos_id {eos} is outside the vocabulary (size {vocab})")
    pairs = _pairs(path, files, problems)
    if not problems:
        for bin_entry, idx_entry in pairs:
            problems += _check_pair(folder, bin_entry, idx_entry, DTYPES[dtype_name], vocab, eos)
    bins = [b for b, _ in pairs]
    totals = {
        "documents": sum(b["documents"] for b in bins),
        "tokens": sum(b["tokens"] for b in bins),
    }
    if doc.get("totals") != totals:
        problems.append(f"{path}: totals {doc.get('totals')} but the files add up to {totals}")
    return problems + _check_shards(path, doc, bins)


def _pairs(
    path: Path, files: list[dict[str, Any]], problems: list[str]
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    by_name = {f["name"]: f for f in files}
    pairs = []
    for entry in files:
        if not entry["name"].endswith(".bin"):
            continue
        idx = by_name.get(entry["name"][: -len(".bin")] + ".idx")
        if idx is None:
            problems.append(f"{path}: {entry['name']} has no .idx entry")
            continue
        if (idx["tokens"], idx["documents"]) != (entry["tokens"], entry["documents"]):
            problems.append(f"{path}: {entry['name']} and its .idx disagree on tokens/documents")
        pairs.append((entry, idx))
    if 2 * len(pairs) != len(files):
        problems.append(f"{path}: files must be .bin/.idx pairs ({len(files)} entries)")
    return pairs


def _check_pair(
    folder: Path,
    bin_entry: dict[str, Any],
    idx_entry: dict[str, Any],
    dtype: np.dtype[Any],
    vocab: int,
    eos: int,
) -> list[str]:
    """Sizes match counts; offsets rise to the token count; EOS ends each document; ids < vocab."""
    name = bin_entry["name"]
    if bin_entry["bytes"] != bin_entry["tokens"] * dtype.itemsize:
        return [f"{folder / name}: {bin_entry['bytes']} bytes is not {bin_entry['tokens']} tokens"]
    if idx_entry["bytes"] != idx_entry["documents"] * IDX_DTYPE.itemsize:
        return [f"{folder / idx_entry['name']}: size is not {idx_entry['documents']} offsets"]
    if bin_entry["tokens"] == 0:
        return [] if bin_entry["documents"] == 0 else [f"{folder / name}: documents but no tokens"]
    ends = np.fromfile(folder / idx_entry["name"], dtype=IDX_DTYPE)
    tokens = np.memmap(folder / name, dtype=dtype, mode="r")
    problems = []
    if ends.size and (np.any(np.diff(ends) < 1) or ends[0] < 1 or ends[-1] != tokens.size):
        problems.append(f"{folder / idx_entry['name']}: offsets do not rise to {tokens.size}")
    elif ends.size and np.any(tokens[ends.astype(np.int64) - 1] != eos):
        problems.append(f"{folder / name}: a document does not end with EOS {eos}")
    top = max(int(tokens[i : i + (1 << 24)].max()) for i in range(0, tokens.size, 1 << 24))
    if top >= vocab:
        problems.append(f"{folder / name}: token id {top} is outside the vocabulary ({vocab})")
    return problems


def _check_shards(path: Path, doc: dict[str, Any], bins: list[dict[str, Any]]) -> list[str]:
    """The shards manifest still has the recorded digest and one row per token document."""
    rel = doc.get("shards_manifest")
    if not isinstance(rel, str):
        return [f"{path}: no shards_manifest path"]
    shards_path = path.parent / rel
    try:
        raw = shards_path.read_bytes()
    except OSError:
        return [f"{path}: its shards manifest {shards_path} is missing"]
    if hashlib.sha256(raw).hexdigest() != doc.get("shards_manifest_sha256"):
        return [f"{path}: shards manifest {shards_path} changed since the tokens were built"]
    rows = {s["name"]: s["rows"] for s in json.loads(raw).get("shards", [])}
    docs = {b["shard"]: b["documents"] for b in bins}
    if rows.keys() != docs.keys():
        return [f"{path}: token files cover shards {sorted(docs)}, manifest has {sorted(rows)}"]
    return [
        f"{path}: {name} has {rows[name]} rows but {docs[name]} token documents"
        for name in rows
        if rows[name] != docs[name]
    ]
