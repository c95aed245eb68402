"""Phase 1 of the shard stage: per-task filtering, PII, keys and signatures, in worker processes.

A task is one row group of one raw Parquet part. Its output (the documents that pass the
filters, PII scrubbed, with the exact keys and MinHash signatures of those scrubbed texts) is
written to the work folder, then a `.done` marker with its counts: the marker is the task's
completion record, so a resumed stage skips it, and when a pool worker dies a new pool runs the
tasks that have none (`local_pool`). Dedup compares the texts as they are written, so two
documents that differ only in an email address are copies, as they are in the output.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpus_assets.core.config import LoadedConfig
from corpus_assets.core.errors import CorpusError
from corpus_assets.core.stages.local_pool import die_with_parent, open_pool, run_with_rebuilds
from corpus_assets.core.stages.ray_tasks import RaySession
from corpus_assets.core.stages.screen import (
    EXCLUDED,
    Screening,
    decontaminate,
    excluded_by_id,
    excluded_by_key,
)
from corpus_assets.core.stages.screen_index import NO_SCREENS, Screens
from corpus_assets.core.stages.shard_quality import Classifier, score_texts
from corpus_assets.core.store.arrow import release_freed_pages
from corpus_assets.core.store.atomic import atomic_writer, write_bytes, write_json
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.progress import Progress
from corpus_assets.core.text.boilerplate import stripper
from corpus_assets.core.text.filters import QualityFilter
from corpus_assets.core.text.language import language_id
from corpus_assets.core.text.minhash import signatures
from corpus_assets.core.text.normalize import exact_key, normalize
from corpus_assets.core.text.pii import Scrubber
from corpus_assets.core.version import CODE_VERSION

PII_KINDS = ("email", "ip", "phone")
TASK_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("text", pa.string()),
        ("source", pa.string()),
        ("license", pa.string()),
        ("text_bytes", pa.int64()),
    ]
    + [(f"pii_{k}", pa.int32()) for k in PII_KINDS]
)
LANGUAGE_FIELDS = [("language", pa.string()), ("language_score", pa.float32())]
"""Columns of the task files and shards when `[filters] languages` is set."""
TASK_DICTIONARY = ["source", "license"]
"""The task file's columns worth a dictionary: ids and texts are distinct, and building a
dictionary of them only to abandon it costs ~4 µs a short document."""


@dataclass(frozen=True)
class Task:
    """One row group of one raw part of one source."""

    index: int
    part: Path
    row_group: int


@dataclass(frozen=True)
class TaskOutput:
    """The counts of a finished task; its documents are in the work folder."""

    index: int
    docs_in: int
    bytes_in: int
    kept: int
    dropped: dict[str, int]
    screened: dict[str, int] = field(default_factory=dict)
    """Screened documents by `<reason>/<eval set or list>` (`contaminated`, `cut`, `excluded`)."""
    boilerplate: dict[str, int] = field(default_factory=dict)
    """Boilerplate lines removed (`lines`) and the documents they were removed from."""
    classified: dict[str, dict[str, Any]] = field(default_factory=dict)
    lines_removed: dict[str, int] = field(default_factory=dict)
    """Lines C4's line rules removed from the documents they read, by reason."""
    """Per classifier: the `histogram` of the scores, the `lowest_kept` score (shard_quality)."""


def plan_tasks(layout: Layout, sources: list[dict[str, Any]]) -> list[Task]:
    """Tasks in the global document order: sources as configured, parts, row groups."""
    tasks: list[Task] = []
    for source in sources:
        for f in source["files"]:
            part = layout.raw_source(source["source_key"]) / f["name"]
            for rg in range(pq.ParquetFile(part).num_row_groups):
                tasks.append(Task(len(tasks), part, rg))
    return tasks


def task_path(task_dir: Path, index: int, suffix: str) -> Path:
    return task_dir / f"task-{index:06d}{suffix}"


def load_output(task_dir: Path, index: int) -> TaskOutput | None:
    """The output of a finished task, or None when it must run (again)."""
    marker = task_path(task_dir, index, ".done")
    try:
        record = json.loads(marker.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):  # a torn or corrupt marker: the task runs again
        return None
    if not isinstance(record, dict) or record.pop("code_version", None) != CODE_VERSION:
        return None
    try:
        return TaskOutput(**record)
    except TypeError:
        return None


def run_tasks(
    cfg: LoadedConfig,
    layout: Layout,
    tasks: list[Task],
    task_dir: Path,
    workers: int,
    progress: Progress,
    screens: Screens = NO_SCREENS,
    session: RaySession | None = None,
    classifiers: tuple[Classifier, ...] = (),
) -> list[TaskOutput]:
    """Run every unfinished task (in `workers` processes, or on Ray when given a session) and
    return all outputs in order."""
    task_dir.mkdir(parents=True, exist_ok=True)
    done = {t.index: load_output(task_dir, t.index) for t in tasks}
    pending = [t for t in tasks if done[t.index] is None]
    if len(pending) < len(tasks):
        progress.note(f"resuming: {len(tasks) - len(pending)} of {len(tasks)} tasks already done")
    work = (task_dir, screens, classifiers)
    for out in _execute(cfg, pending, work, workers, session, progress.note):
        done[out.index] = out
        progress.add(out.docs_in, out.bytes_in)
    for task in pending:  # it finished in a pool that a dead worker broke before it answered
        if done[task.index] is None:
            done[task.index] = out = _marked(task_dir, task.index)
            progress.add(out.docs_in, out.bytes_in)
    return [o for o in (done[t.index] for t in tasks) if o is not None]


def _marked(task_dir: Path, index: int) -> TaskOutput:
    out = load_output(task_dir, index)
    if out is None:
        raise CorpusError(f"task {index} in {task_dir} left no output; run the stage again")
    return out


def _execute(
    cfg: LoadedConfig,
    pending: list[Task],
    work: tuple[Path, Screens, tuple[Classifier, ...]],
    workers: int,
    session: RaySession | None,
    note: Callable[[str], None],
) -> Iterator[TaskOutput]:
    if session is not None:
        yield from session.map(run_task, [(cfg, task, *work) for task in pending])
        return
    if workers <= 1 or len(pending) <= 1:
        for task in pending:
            yield run_task(cfg, task, *work)
        return
    # fork (Python's default on Linux) starts a worker in milliseconds; spawn re-imports for ~1 s
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)

    def attempt(batch: list[Task]) -> Iterator[TaskOutput]:
        with open_pool(min(workers, len(batch)), ctx, die_with_parent, (os.getpid(),)) as pool:
            futures = [pool.submit(run_task, cfg, task, *work) for task in batch]
            for future in futures:
                yield future.result()

    def unfinished(task: Task) -> bool:
        return load_output(work[0], task.index) is None

    yield from run_with_rebuilds(pending, attempt, unfinished, "shard worker", note)


def read_task(task: Task) -> pa.Table:
    """The raw documents of one task, as the shard stage reads them (also `corpus report`)."""
    table = pq.ParquetFile(task.part, pre_buffer=False).read_row_group(
        task.row_group, columns=["id", "text", "source", "license"], use_threads=False
    )
    release_freed_pages()  # the reader's page buffers: as large as the largest document
    return table


def run_task(
    cfg: LoadedConfig,
    task: Task,
    task_dir: Path,
    screens: Screens = NO_SCREENS,
    classifiers: tuple[Classifier, ...] = (),
) -> TaskOutput:
    """Screen and filter one row group; write survivors, their keys and signatures, the marker."""
    table = read_task(task)
    quality = QualityFilter(cfg.model.filters)  # C4's line rules may shorten a kept text
    langid = language_id(cfg.model.filters)
    strip = stripper(cfg.model.filters, task_dir)  # lines in more than N documents of the build
    stripped = Counter[str]()
    found: dict[int, tuple[str, float]] = {}  # row: its language and score
    screening = Screening()
    ids = table.column("id").to_pylist() if screens.active else []
    sources = table.column("source").to_pylist() if screens.active else []

    def doc(row: int) -> dict[str, Any]:
        return {"id": ids[row], "source": sources[row]}

    listed = excluded_by_id(screens, ids)
    dropped: Counter[str] = Counter()
    rows: list[int] = []
    texts: list[str] = []
    bytes_in = pc.sum(pc.binary_length(table.column("text"))).as_py() or 0
    raws = table.column("text").to_pylist()
    table = table.drop_columns("text")  # the texts are Python strings now: Arrow's copy goes
    release_freed_pages()
    live: list[int] = []  # rows not excluded by id, and their texts
    candidates: list[str] = []
    for row, raw in enumerate(raws):
        if row in listed:
            screening.drop(EXCLUDED, listed[row], doc(row), by="id")
            continue
        text = normalize(raw)
        if strip is not None:
            text, lines = strip(text)
            stripped.update({"lines": lines, "documents": 1} if lines else {})
        live.append(row)
        candidates.append(text)
    cleaned = quality.many(candidates)  # many texts at once: their n-grams counted together
    lines_removed = dict(sorted(quality.lines_removed.items()))  # not decontamination's rechecks
    for row, (text, reason) in zip(live, cleaned, strict=True):
        if reason is None and langid is not None:  # after the cheap rules: it costs more
            language, score, reason = langid(text)
            found[row] = (language, score)
        if reason is None:
            rows.append(row)
            texts.append(text)
        else:
            dropped[reason] += 1
    scored = score_texts(classifiers, texts)  # after the rules and language ID: it costs the most
    scores = {
        c.name: dict(zip(rows, scored.scores[c.name].tolist(), strict=True)) for c in classifiers
    }
    if any(scored.reasons):
        dropped.update(r for r in scored.reasons if r is not None)
        rows, texts = (
            [r for r, why in zip(rows, scored.reasons, strict=True) if why is None],
            [t for t, why in zip(texts, scored.reasons, strict=True) if why is None],
        )
    matched = decontaminate(
        screens, texts, lambda i: doc(rows[i]), lambda t: quality(t)[1] is None, screening
    )
    if matched:  # a matched document is dropped (None) or kept cut
        screened = [
            (r, matched.get(i, t)) for i, (r, t) in enumerate(zip(rows, texts, strict=True))
        ]
        rows = [r for r, t in screened if t is not None]
        texts = [t for _r, t in screened if t is not None]
    languages = found if langid is not None else None
    kept = _write_task(
        cfg, table, rows, texts, task_dir, task.index, screens, screening, doc, languages, scores
    )
    for key, n in screening.counts.items():
        reason = key.split("/", 1)[0]
        if reason != "cut":
            dropped[reason] += n
    if screens.active:
        write_bytes(task_path(task_dir, task.index, ".audit.jsonl"), screening.jsonl())
    out = TaskOutput(
        task.index,
        table.num_rows,
        bytes_in,
        kept,
        dict(sorted(dropped.items())),
        dict(sorted(screening.counts.items())),
        dict(sorted(stripped.items())),
        scored.stats,
        lines_removed,
    )
    write_json(
        task_path(task_dir, task.index, ".done"), {**asdict(out), "code_version": CODE_VERSION}
    )
    return out


def _write_task(
    cfg: LoadedConfig,
    table: pa.Table,
    rows: list[int],
    texts: list[str],
    task_dir: Path,
    index: int,
    screens: Screens,
    screening: Screening,
    doc: Any,
    languages: dict[int, tuple[str, float]] | None = None,
    quality: dict[str, dict[int, float]] | None = None,
) -> int:
    """Scrub PII, key the texts as they will be written (dedup compares those), drop the ones
    an earlier build holds, then write the rest with their keys and signatures; how many."""
    scrubber = Scrubber(cfg.model.pii)
    scrubbed: list[str] = []
    counts: dict[str, list[int]] = {k: [] for k in PII_KINDS}
    for text in texts:
        clean, found = scrubber.scrub(text)
        scrubbed.append(clean)
        for k in PII_KINDS:
            counts[k].append(found.get(k, 0))
    keys = np.frombuffer(b"".join(exact_key(t) for t in scrubbed), dtype="<u8").reshape(-1, 2)
    known = excluded_by_key(screens, keys)
    if known:
        for pos, name in sorted(known.items()):
            screening.drop(EXCLUDED, name, doc(rows[pos]), by="text")
        keep = [i for i in range(len(rows)) if i not in known]
        rows, scrubbed, keys = [rows[i] for i in keep], [scrubbed[i] for i in keep], keys[keep]
        counts = {k: [v[i] for i in keep] for k, v in counts.items()}
    kept = table.take(pa.array(rows, pa.int64()))
    _save_npy(task_path(task_dir, index, ".keys.npy"), keys)
    if cfg.model.dedup.near:
        _save_npy(task_path(task_dir, index, ".sigs.npy"), signatures(scrubbed, cfg.model.dedup))
    columns: dict[str, Any] = {
        "id": kept.column("id"),
        "text": scrubbed,
        "source": kept.column("source"),
        "license": kept.column("license"),
        "text_bytes": [len(t.encode("utf-8")) for t in scrubbed],
        **{f"pii_{k}": counts[k] for k in PII_KINDS},
    }
    schema = TASK_SCHEMA
    if languages is not None:
        columns["language"] = [languages[r][0] for r in rows]
        columns["language_score"] = [languages[r][1] for r in rows]
        schema = pa.schema([*TASK_SCHEMA, *LANGUAGE_FIELDS])
    for name, scores in (quality or {}).items():  # a float64 column per classifier
        columns[f"quality_{name}"] = [scores[r] for r in rows]
        schema = schema.append(pa.field(f"quality_{name}", pa.float64()))
    # no folder fsync for the task's files: the marker's, written after them, covers them
    with atomic_writer(task_path(task_dir, index, ".parquet"), sync_dir=False) as fh:
        table = pa.table(columns, schema=schema)
        pq.write_table(table, fh, compression="zstd", use_dictionary=TASK_DICTIONARY)
    return len(rows)


def _save_npy(path: Path, array: np.ndarray[Any, Any]) -> None:
    with atomic_writer(path, sync_dir=False) as fh:
        np.save(fh, array, allow_pickle=False)
