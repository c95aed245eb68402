"""The shard stage: license check, filters, exact and near dedup, PII scrubbing, Parquet shards.

Three phases, each deterministic whatever the worker count:

1. per task (one row group of one raw part), in worker processes: normalize, filter, PII scrub,
   then the exact key and MinHash signature of the scrubbed text; the survivors of the filters
   go to a task file in staging with a `.done` marker written last, so a killed stage resumes
   without redoing finished tasks;
2. in the parent: exact dedup over all exact keys, then MinHash-LSH near dedup over the
   signatures of the exact survivors, band by band from disk (shard_lsh.py; memory: the exact
   keys, 16 bytes a document, one band's keys at a time and the buckets shared by two
   documents or more); a near copy that holds its kept match whole plus new paragraphs keeps
   only those (`partial`);
3. in the parent: the survivors, in task order, go to shards of the target size; the manifest
   is written last and the folder is published by rename.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from corpus_assets.core.config import LANGUAGE_MODEL, LoadedConfig
from corpus_assets.core.errors import ConfigError, DataError, UpstreamMissing
from corpus_assets.core.secrets import mask_data
from corpus_assets.core.stages.backend import LOCAL, Backend
from corpus_assets.core.stages.ray_tasks import RaySession, ray_or_local
from corpus_assets.core.stages.screen_index import Screens, prepare
from corpus_assets.core.stages.shard_dedup import duplicates
from corpus_assets.core.stages.shard_quality import Classifier, Cut, classifiers, keep_top
from corpus_assets.core.stages.shard_quality import manifest_entry as classifier_entries
from corpus_assets.core.stages.shard_tasks import (
    TaskOutput,
    plan_tasks,
    read_task,
    run_tasks,
    task_path,
)
from corpus_assets.core.stages.shard_verify import verify_shards
from corpus_assets.core.stages.shard_write_tasks import write_shards_on
from corpus_assets.core.stages.shard_writer import write_shards
from corpus_assets.core.store import ledger
from corpus_assets.core.store.arrow import skip_pandas
from corpus_assets.core.store.atomic import (
    MANIFEST,
    fresh_dir,
    private_dir,
    publish_dir,
    remove_tree,
    write_json,
)
from corpus_assets.core.store.digests import file_sha256, verify_files
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.locks import build_lock
from corpus_assets.core.store.progress import Progress
from corpus_assets.core.text import boilerplate
from corpus_assets.core.text.filters import QualityFilter
from corpus_assets.core.text.language import language_id
from corpus_assets.core.text.normalize import normalize
from corpus_assets.core.version import CODE_VERSION


@dataclass(frozen=True)
class ShardResult:
    """What the shard stage published (or found already published)."""

    manifest: Path
    docs_in: int
    docs_out: int
    dropped: dict[str, int]
    duplicates: dict[str, int]
    partial_copies: int
    pii: dict[str, int]
    shards: int
    bytes_out: int
    cached: bool
    contaminated: dict[str, int] = field(default_factory=dict)
    """Documents dropped per eval set (plus `cut` ones, see the manifest)."""
    excluded: dict[str, int] = field(default_factory=dict)
    """Documents dropped per exclusion list."""


AUDIT = "audit.jsonl"


def shard(
    cfg: LoadedConfig,
    layout: Layout,
    workers: int,
    progress: Progress,
    backend: Backend = LOCAL,
) -> ShardResult:
    """Build (or find) the shards of `cfg`; every check happens before anything is written.

    On a `ray` backend, phase 1, the grouping of phase 2's LSH bands and phase 3 run as Ray
    tasks, Ray started when the first is due.

    Single-flight: the stage holds the build's shard lock for its whole run, so a second start
    of it waits, then finds the published shards (or, if the holder died, resumes its tasks).
    """
    lock = layout.stage_lock(cfg.hash12, "shard")
    with (
        build_lock(lock, f"the shard stage of {cfg.build_id}", progress.note),
        ray_or_local(backend, workers, layout.work(cfg, "shard"), progress) as session,
    ):
        return _shard(cfg, layout, workers, progress, session)


def _shard(
    cfg: LoadedConfig,
    layout: Layout,
    workers: int,
    progress: Progress,
    session: RaySession | None,
) -> ShardResult:
    if not cfg.model.sources:
        raise ConfigError("the config has no [[sources]]; the shard stage needs at least one")
    sources = check_sources(cfg, layout)
    skip_pandas()  # before the workers fork: none of them imports it
    final = layout.shards(cfg)
    if (final / MANIFEST).exists() and not verify_shards(final / MANIFEST):
        progress.note(f"already published: {final.relative_to(layout.root)}")
        return result_of(final / MANIFEST, cached=True)
    work = layout.work(cfg, "shard")
    private_dir(layout.work_root)  # pieces of unscrubbed documents go there: owner-only
    tasks = plan_tasks(layout, sources)
    language_id(cfg.model.filters)  # a language the model does not know: exit 64 before any task
    scorers = tuple(classifiers(cfg, layout, progress.note))  # the same for a missing model
    screens = prepare(cfg, layout, work, progress)
    lines = _find_boilerplate(cfg, tasks, work / "tasks", progress)
    outputs = run_tasks(
        cfg, layout, tasks, work / "tasks", workers, progress, screens, session, scorers
    )
    _refuse_empty(outputs)
    progress.note(f"deduplicating {sum(o.kept for o in outputs):,} filtered documents")
    dedup = duplicates(cfg, outputs, work / "tasks", progress, session)
    counts = {"exact": int(dedup.exact.sum()), "near": int(dedup.near.sum())}
    drop, cuts = _keep_top(scorers, outputs, work / "tasks", dedup.exact | dedup.near, progress)
    progress.note(
        f"duplicates: {counts['exact']:,} exact, {counts['near']:,} near; "
        f"{len(dedup.partial):,} partial copies cut to their new paragraphs; writing shards"
    )
    staging = fresh_dir(work / "staging")
    write = write_shards if session is None else partial(write_shards_on, session)
    shards, written = write(cfg, outputs, work / "tasks", drop, dedup.partial, staging, progress)
    partial_copies, unchecked = len(dedup.partial), dedup.near_unchecked
    manifest = _manifest(cfg, sources, outputs, counts, partial_copies, unchecked, shards, written)
    if scorers:
        manifest = _classified(manifest, scorers, outputs, cuts)
    if lines is not None:
        manifest |= _boilerplate(cfg, outputs, lines)
    if QualityFilter(cfg.model.filters).edits_lines:
        manifest["lines_removed"] = _lines_removed(outputs)
    if screens.active:
        manifest |= _screening(screens, outputs, _write_audit(outputs, work / "tasks", staging))
    write_json(staging / MANIFEST, manifest)
    publish_dir(staging, final)
    remove_tree(work)
    progress.done()
    return result_of(final / MANIFEST, cached=False)


def _keep_top(
    scorers: tuple[Classifier, ...],
    outputs: list[TaskOutput],
    task_dir: Path,
    drop: Any,
    progress: Progress,
) -> tuple[Any, dict[str, Cut]]:
    """The `drop` mask with the `keep_top` cuts of the deduplicated documents added."""
    rows = [(o.index, o.kept) for o in outputs]
    return keep_top(scorers, rows, lambda i: task_path(task_dir, i, ".parquet"), drop, progress)


def _classified(
    manifest: dict[str, Any],
    scorers: tuple[Classifier, ...],
    outputs: list[TaskOutput],
    cuts: dict[str, Cut],
) -> dict[str, Any]:
    """The manifest with the `classifiers` entry, and the `keep_top` cuts in `dropped`."""
    dropped = dict(manifest["dropped"])
    for c in scorers:
        if c.name in cuts and cuts[c.name].candidates > cuts[c.name].kept:
            dropped[c.column] = cuts[c.name].candidates - cuts[c.name].kept
    entry = classifier_entries(scorers, [o.classified for o in outputs], dropped, cuts)
    return {**manifest, "dropped": dict(sorted(dropped.items())), **entry}


def _refuse_empty(outputs: list[TaskOutput]) -> None:
    """DataError when the filters and screens kept no document: an empty corpus is no result."""
    if any(o.kept for o in outputs):
        return
    dropped: Counter[str] = Counter()
    for o in outputs:
        dropped.update(o.dropped)
    why = ", ".join(f"{n:,} {reason}" for reason, n in dropped.most_common()) or "none read"
    raise DataError(
        f"no document survived the filters: {why} (of {sum(o.docs_in for o in outputs):,}); "
        "nothing to publish: check the sources or loosen [filters]"
    )


def check_sources(cfg: LoadedConfig, layout: Layout) -> list[dict[str, Any]]:
    """Every source fetched, licensed on the allow-list, its raw files as the ledger says."""
    entries = ledger.read(layout)
    allow = cfg.model.licenses.allow
    checked = []
    for spec in cfg.model.sources:
        key = cfg.source_key(spec)
        if spec.license not in allow:
            raise DataError(
                f"source {spec.name!r} has license {spec.license!r}, which is not on the "
                f"allow-list ({', '.join(allow)}); add it to [licenses] allow to use it"
            )
        entry = entries.get(key)
        if entry is None or not (layout.raw_source(key) / "_SOURCE.json").exists():
            raise UpstreamMissing(
                "raw", f"source {spec.name!r} was not fetched (no raw/{key} in the ledger)"
            )
        if not isinstance(entry.get("license"), str):
            raise DataError(
                f"{layout.ledger}: corrupt ledger line of source {key}: no license; {ledger.FIX}"
            )
        if entry["license"] not in allow:
            raise DataError(
                f"source {spec.name!r}: ledger license {entry['license']!r} not allowed"
            )
        problems = verify_files(layout.raw_source(key), entry["files"])
        if problems:
            raise DataError(
                f"source {spec.name!r}: raw files differ from the ledger: {'; '.join(problems)}"
            )
        checked.append(
            {
                "name": spec.name,
                "source_key": key,
                "license": entry["license"],
                "documents": entry["documents"],
                "files": entry["files"],
            }
        )
    return checked


def result_of(manifest_path: Path, cached: bool) -> ShardResult:
    m = json.loads(manifest_path.read_text(encoding="utf-8"))
    return ShardResult(
        manifest=manifest_path,
        docs_in=m["documents_in"],
        docs_out=m["documents_out"],
        dropped=m["dropped"],
        duplicates=m["duplicates"],
        partial_copies=m.get("partial_copies", 0),
        pii=m["pii"],
        shards=len(m["shards"]),
        bytes_out=m["text_bytes_out"],
        cached=cached,
        contaminated={
            s["name"]: s["documents_dropped"] + s["documents_cut"]
            for s in m.get("decontamination", {}).get("sets", [])
        },
        excluded={x["name"]: x["documents"] for x in m.get("exclusions", [])},
    )


def _write_audit(outputs: list[TaskOutput], task_dir: Path, staging: Path) -> dict[str, Any]:
    """The tasks' audit records, in task order, as one JSONL file; its manifest entry."""
    path, rows = staging / AUDIT, 0
    with open(path, "wb") as out:
        for o in outputs:
            data = task_path(task_dir, o.index, ".audit.jsonl").read_bytes()
            rows += data.count(b"\n")
            out.write(data)
        out.flush()
        os.fsync(out.fileno())
    return {"name": AUDIT, "sha256": file_sha256(path), "bytes": path.stat().st_size, "rows": rows}


def _screening(
    screens: Screens, outputs: list[TaskOutput], audit: dict[str, Any]
) -> dict[str, Any]:
    """The manifest's decontamination and exclusion counts, per eval set and per list."""
    counts: Counter[str] = Counter()
    for o in outputs:
        counts.update(o.screened)
    out: dict[str, Any] = {"audit": audit}
    if screens.sets:
        out["decontamination"] = {
            "ngram": screens.ngram,
            "mode": screens.mode,
            "sets": [
                {
                    "name": s.name,
                    "eval_sha256": s.record["eval_sha256"],
                    "items": s.record["items"],
                    "short_items": s.record["short_items"],
                    "ngrams": s.record["ngrams"],
                    "documents_dropped": counts[f"contaminated/{s.name}"],
                    "documents_cut": counts[f"cut/{s.name}"],
                }
                for s in screens.sets
            ],
        }
    if screens.lists:
        out["exclusions"] = [
            {
                "name": x.name,
                "kind": x.kind,
                "entries": x.entries,
                "documents": counts[f"excluded/{x.name}"],
            }
            for x in screens.lists
        ]
    return out


def _find_boilerplate(
    cfg: LoadedConfig, tasks: list[Any], task_dir: Path, progress: Progress
) -> int | None:
    """Count every document's lines when `boilerplate_max_documents` is set: how many lines
    are boilerplate (None when it is not set)."""
    spec = cfg.model.filters
    if not spec.enabled or spec.boilerplate_max_documents is None:
        return None
    progress.note("counting lines across documents for boilerplate")
    texts = ([normalize(t) for t in read_task(task).column("text").to_pylist()] for task in tasks)
    return len(boilerplate.find(spec, texts, task_dir, progress.beat))


def _boilerplate(cfg: LoadedConfig, outputs: list[TaskOutput], lines: int) -> dict[str, Any]:
    """The manifest's `boilerplate` entry: the lines found, and removed from how many documents."""
    removed: Counter[str] = Counter()
    for o in outputs:
        removed.update(o.boilerplate)
    return {
        "boilerplate": {
            "max_documents": cfg.model.filters.boilerplate_max_documents,
            "min_words": cfg.model.filters.boilerplate_min_words,
            "lines": lines,
            "lines_removed": removed["lines"],
            "documents": removed["documents"],
        }
    }


def _lines_removed(outputs: list[TaskOutput]) -> dict[str, int]:
    """The manifest's `lines_removed`: lines C4's line rules removed, by reason."""
    removed: Counter[str] = Counter()
    for o in outputs:
        removed.update(o.lines_removed)
    return dict(sorted(removed.items()))


def _languages(cfg: LoadedConfig, written: dict[str, Any]) -> dict[str, Any]:
    """The manifest's `language` entry (with the documents written per language), if any."""
    if "languages" not in written:
        return {}
    f = cfg.model.filters
    return {
        "language": {
            "model": LANGUAGE_MODEL,
            "model_sha256": cfg.raw["filters"]["language_model_sha256"],
            "languages": list(f.languages or ()),
            "min_score": f.min_language_score,
            "documents": dict(sorted(written["languages"].items())),
        }
    }


def _manifest(
    cfg: LoadedConfig,
    sources: list[dict[str, Any]],
    outputs: list[TaskOutput],
    duplicates: dict[str, int],
    partial_copies: int,
    near_unchecked: int,
    shards: list[dict[str, Any]],
    written: dict[str, Any],
) -> dict[str, Any]:
    dropped: Counter[str] = Counter()
    for o in outputs:
        dropped.update(o.dropped)
    m = cfg.model
    return {
        "kind": "shards",
        "build_id": cfg.build_id,
        "partition_key": cfg.partition_key,
        "stage_key": cfg.stage_key("shard"),
        "config_sha256": cfg.sha256,
        "config": mask_data(cfg.raw),  # as written, URL secrets masked
        "settings": {
            "filters": m.filters.model_dump(mode="json"),
            "dedup": m.dedup.model_dump(mode="json"),
            "pii": m.pii.model_dump(mode="json"),
            "licenses": m.licenses.model_dump(mode="json"),
            "shards": m.shards.model_dump(mode="json"),
            **{
                k: v.model_dump(mode="json")
                for k, v in (("decontaminate", m.decontaminate), ("exclude", m.exclude))
                if v is not None
            },
        },
        "sources": sources,
        "documents_in": sum(o.docs_in for o in outputs),
        "text_bytes_in": sum(o.bytes_in for o in outputs),
        "documents_out": written["documents"],
        "text_bytes_out": written["text_bytes"],
        "dropped": dict(sorted(dropped.items())),
        "duplicates": duplicates,
        "partial_copies": partial_copies,
        "near_unchecked": near_unchecked,
        "pii": written["pii"],
        **_languages(cfg, written),
        "shards": shards,
        "code_version": CODE_VERSION,
    }
