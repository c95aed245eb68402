"""What a stage subprocess tells Dagster through Pipes, and only when Dagster launched it.

Imports `dagster_pipes` (tiny, no dependencies) lazily and never `dagster`, so `corpus run` stays
fast; run standalone it prints exactly what it printed before.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from corpus_assets.core.secrets import mask_data, mask_text

PIPES_CONTEXT_ENV = "DAGSTER_PIPES_CONTEXT"
Metadata = dict[str, dict[str, Any]]


class Reporter:
    """A thin wrapper over an open Pipes context: log lines, one materialization."""

    def __init__(self, pipes: Any) -> None:
        self._pipes = pipes

    def tee(self, emit: Callable[[str], None]) -> Callable[[str], None]:
        """An emitter that writes a progress line where it went before and to the run log."""

        def both(line: str) -> None:
            emit(line)
            self._pipes.log.info(mask_text(line))

        return both

    def materialized(
        self, summary: dict[str, Any], root: Path, config: dict[str, Any] | None = None
    ) -> None:
        manifest = summary.get("manifest")
        version = _file_sha256(root / manifest) if isinstance(manifest, str) else None
        metadata = summary_metadata(summary, root) | provenance_metadata(summary, root, config)
        self.report(metadata, version)

    def report(self, metadata: Metadata, data_version: str | None) -> None:
        """One asset materialization with this metadata (URL secrets masked) and data version."""
        self._pipes.report_asset_materialization(
            metadata=mask_data(metadata), data_version=data_version
        )


@contextmanager
def pipes_if_launched() -> Iterator[Reporter | None]:
    """A Reporter when the Pipes bootstrap variable is set, else None (standalone run)."""
    if PIPES_CONTEXT_ENV not in os.environ:
        yield None
        return
    from dagster_pipes import open_dagster_pipes

    from corpus_assets.resources.stage_failure import of_exception

    pipes = open_dagster_pipes()
    try:
        yield Reporter(pipes)
    except BaseException as exc:
        # the stage's sentence, exit code and upstream flag as data (stage_failure.py); closed
        # without the exception: a traceback goes to stderr only (the step's stderr_tail)
        if (failed := of_exception(exc)) is not None:
            pipes.report_custom_message(failed.message())
        raise
    finally:
        pipes.close()


SIZES = {"text_bytes_out": "text_size_out", "text_bytes": "text_size"}
"""Byte counts shown once, as a size with the exact count: `116.2 KiB (118,980 bytes)`."""


def summary_metadata(summary: dict[str, Any], root: Path) -> Metadata:
    """Asset metadata from a stage's JSON summary: counts (thousands separated, each shown
    once), tables of drops and sources, paths."""
    md: Metadata = {}
    for key, value in summary.items():
        if key == "manifest" and isinstance(value, str):
            md["manifest"] = _v(str((root / value).resolve()), "path")
        elif key == "dropped" and isinstance(value, dict):
            md["dropped"] = _table(
                [{"reason": k, "documents": count(n)} for k, n in sorted(value.items())],
                [("reason", "string"), ("documents", "string")],
            )
            md["dropped_total"] = _v(count(sum(value.values())), "text")
        elif key in ("duplicates", "pii", "contaminated", "excluded") and isinstance(value, dict):
            for sub, n in sorted(value.items()):
                md[f"{key}_{sub}"] = _v(count(n), "text")
        elif key == "sources" and isinstance(value, list):
            md["sources"] = _sources_table(value)
        elif key in SIZES and isinstance(value, int):
            md[SIZES[key]] = _v(f"{human_size(value)} ({value:,} bytes)", "text")
        else:
            md[key] = _scalar(value)
    _derived(summary, md)
    return md


def count(n: int) -> str:
    """A count as people read it: `119,280`."""
    return f"{n:,}"


SHARD_COLUMNS = (
    ("id", "string", "the document id: the source's id field, else source name and row"),
    ("text", "string", "the filtered, PII-scrubbed text"),
    ("source", "string", "the config's name for the source"),
    ("license", "string", "the source's license"),
)


def provenance_metadata(
    summary: dict[str, Any], root: Path, config: dict[str, Any] | None
) -> Metadata:
    """What a person asks of a build: which config, which inputs, which files, sizes."""
    md: Metadata = {}
    if config is not None:
        md["config"] = _v(_json_block(config), "md")
        md["build"] = _v(
            f"{config.get('dataset')} {config.get('version')}: build {summary.get('build_id')}",
            "text",
        )
    stage = summary.get("stage")
    if stage == "fetch":
        md["sources"] = _fetched_sources(summary, root)
    manifest = summary.get("manifest")
    if isinstance(manifest, str) and (root / manifest).is_file():
        doc = json.loads((root / manifest).read_text(encoding="utf-8"))
        md["manifest_sha256"] = _v(_file_sha256(root / manifest), "text")
        files = doc.get("shards") or doc.get("files") or []
        md["files"] = _files_table(files, stage == "tokenize")
        md["files_size"] = _v(human_size(sum(int(f.get("bytes", 0)) for f in files)), "text")
        if stage == "shard":
            md["dagster/column_schema"] = _v(
                {
                    "columns": [
                        {"name": n, "type": t, "description": d} for n, t, d in SHARD_COLUMNS
                    ]
                },
                "table_schema",
            )
        if stage == "tokenize":
            md["dagster/column_schema"] = _v(_token_columns(doc), "table_schema")
    return md


def _token_columns(doc: dict[str, Any]) -> dict[str, Any]:
    """What `TokenDataset` reads per document: its token ids (.bin) and end offset (.idx)."""
    dtype, idx = doc.get("dtype"), doc.get("idx_dtype")
    columns = [
        ("tokens", f"{dtype}[]", f"the document's token ids, EOS ({doc.get('eos_id')}) last; .bin"),
        ("end", str(idx), "offset one past the document's last token in its .bin; .idx"),
    ]
    return {"columns": [{"name": n, "type": t, "description": d} for n, t, d in columns]}


def human_size(count: int) -> str:
    """`123 B`, `118.2 KiB`, `3.4 MiB`, ... (powers of 1024, one decimal)."""
    size, unit = float(count), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{count} B" if unit == "B" else f"{size:.1f} {unit}"


def _fetched_sources(summary: dict[str, Any], root: Path) -> dict[str, Any]:
    """Per fetched source: name, license, path, input sha256, documents, size."""
    rows = []
    for source in summary.get("sources", []):
        record = root / "raw" / str(source.get("source_key")) / "_SOURCE.json"
        doc = json.loads(record.read_text(encoding="utf-8")) if record.is_file() else {}
        spec = doc.get("spec", {})
        rows.append(
            {
                "name": doc.get("source"),
                "license": doc.get("license"),
                "path": spec.get("path") or spec.get("hf") or spec.get("url"),
                "input_sha256": doc.get("input_sha256"),
                "documents": count(int(source.get("documents", 0))),
                "size": human_size(int(source.get("text_bytes", 0))),
                "cached": bool(source.get("cached")),
            }
        )
    columns = [
        ("name", "string"),
        ("license", "string"),
        ("path", "string"),
        ("input_sha256", "string"),
        ("documents", "string"),
        ("size", "string"),
        ("cached", "bool"),
    ]
    return _table(rows, columns)


def _files_table(files: list[dict[str, Any]], tokens: bool) -> dict[str, Any]:
    """One row per shard or token file: name, documents, tokens, size, sha256."""
    rows = []
    for f in files:
        # an .idx file holds the offsets of its .bin's documents: their counts are on the .bin row
        counted = not str(f.get("name", "")).endswith(".idx")
        documents = f.get("rows", f.get("documents"))
        rows.append(
            {
                "name": f.get("name"),
                "documents": count(documents) if counted and isinstance(documents, int) else None,
                **({"tokens": count(f["tokens"]) if counted else None} if tokens else {}),
                "size": human_size(int(f.get("bytes", 0))),
                "sha256": f.get("sha256"),
            }
        )
    columns = [("name", "string"), ("documents", "string")]
    columns += [("tokens", "string")] if tokens else []
    columns += [("size", "string"), ("sha256", "string")]
    return _table(rows, columns)


def task_metadata(snapshot: Path) -> Metadata:
    """Asset metadata of a task snapshot: its id, counts per step, selection, calibration."""
    manifest = json.loads((snapshot / "manifest.json").read_text(encoding="utf-8"))
    report = json.loads((snapshot / "report.json").read_text(encoding="utf-8"))
    totals, batches = report["totals"], report["batches"]
    counts = {
        "generated": totals["generated"],
        "cleaned": totals["generated"] - totals["rejected"],
        "rejected": totals["rejected"],
        "duplicates": totals["duplicates"],
        "excluded": totals["excluded"],
        "retained": totals["retained"],
        "calibrated": sum(int(b.get("calibrated", 0)) for b in batches),
        "selected": report["selection"]["selected"],
    }
    md: Metadata = {
        "dataset_id": _v(manifest["dataset_id"], "text"),
        "dataset_path": _v(str(snapshot.resolve()), "path"),
        "dagster/row_count": _v(manifest["rows"], "int"),
        "partition_key": _v(manifest["job"]["partition_key"], "text"),
        "config": _v(_json_block(manifest["config"]), "md"),
        "config_sha256": _v(manifest["job"]["config_sha256"], "text"),
        "calibrated_selection": _v(bool(report["calibrated"]), "bool"),
        "counts": _table(
            [{"step": k, "tasks": count(n)} for k, n in counts.items()],
            [("step", "string"), ("tasks", "string")],
        ),
        "selection_statistics": _v(report["selection"]["statistics"], "json"),
    }
    builds = manifest.get("sources", {}).get("corpus_inputs") or []
    if builds:
        md["corpus_builds"] = _corpus_builds(builds)
    if manifest.get("calibration") is not None:
        md["calibration"] = _v(manifest["calibration"], "json")
    return md


def _corpus_builds(builds: list[dict[str, Any]]) -> dict[str, Any]:
    """The corpus builds the job read, each linked to its `shards` partition page."""
    lines = [
        f"- [{b['partition_key']}](/assets/shards?view=partitions&partition={b['partition_key']})"
        f": build `{b['build_id']}`, shards manifest sha256 `{b['manifest_sha256']}`"
        for b in builds
    ]
    return _v("Read from the corpus builds:\n\n" + "\n".join(lines), "md")


def _json_block(value: Any) -> str:
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    return f"```json\n{text}\n```"


def _derived(summary: dict[str, Any], md: Metadata) -> None:
    rows = summary.get("documents_out", summary.get("documents"))
    if isinstance(rows, int):
        md["dagster/row_count"] = _v(rows, "int")
    dupes = summary.get("duplicates")
    if isinstance(dupes, dict) and isinstance(summary.get("documents_in"), int):
        kept = summary.get("documents_out", 0) + sum(dupes.values())
        removed = sum(dupes.values())
        share = f" ({100 * removed / kept:.1f} %)" if kept else ""
        md["dedup_removed"] = _v(
            f"{removed:,} of {kept:,} documents left by the filters{share}", "text"
        )


def _sources_table(sources: list[Any]) -> dict[str, Any]:
    columns: list[tuple[str, str]] = []
    for src in sources:
        for k, v in src.items():
            if (k, _column_type(v)) not in columns and not isinstance(v, dict | list):
                columns.append((k, _column_type(v)))
    names = [c for c, _ in columns]
    return _table([{k: _cell(s.get(k)) for k in names} for s in sources], columns)


def _cell(value: Any) -> Any:
    return count(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _column_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, float):
        return "float"
    return "string"  # an int is a count: shown thousands separated


def _scalar(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return _v(value, "bool")
    if isinstance(value, int):
        return _v(count(value), "text")
    if isinstance(value, float):
        return _v(value, "float")
    if isinstance(value, str):
        return _v(value, "text")
    return _v(value, "json")


def _table(records: list[dict[str, Any]], columns: list[tuple[str, str]]) -> dict[str, Any]:
    schema = [{"name": name, "type": kind} for name, kind in columns]
    return _v({"records": records, "schema": schema}, "table")


def _v(raw: Any, kind: str) -> dict[str, Any]:
    return {"raw_value": raw, "type": kind}


def _file_sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
