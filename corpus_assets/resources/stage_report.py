"""What a stage subprocess tells Dagster through Pipes, and only when Dagster launched it.

Imports `dagster_pipes` (tiny, no dependencies) lazily and never `dagster`, so `corpus run` stays
fast; run standalone, a stage prints its progress lines and its JSON summary, nothing more.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corpus_assets.core.secrets import mask_data, mask_text
from corpus_assets.core.store.digests import file_sha256
from corpus_assets.core.store.layout import Layout

if TYPE_CHECKING:
    from dagster_pipes import PipesMetadataType, PipesMetadataValue

PIPES_CONTEXT_ENV = "DAGSTER_PIPES_CONTEXT"
Metadata = dict[str, "PipesMetadataValue"]


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
        path = root / manifest if isinstance(manifest, str) else None
        version = file_sha256(path) if path is not None and path.is_file() else None
        metadata = summary_metadata(summary, root) | provenance_metadata(summary, root, config)
        line = _v(summary_line(summary, metadata), "md")
        self.report({"summary": line} | metadata, version)

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


SKIPPED = frozenset({"stage", "stage_key", "partition_key", "dtype", "eos_id"})
"""Said elsewhere on the page: the asset's `corpus/stage` tag, its partition, the build id; the
token dtype and EOS id are in the column schema."""
ROWS = ("documents_out", "documents")
"""The summary key that counts the asset's rows, shown once as `dagster/row_count`."""


def summary_metadata(summary: dict[str, Any], root: Path) -> Metadata:
    """Asset metadata from a stage's JSON summary: every count, size and ratio a number, each
    once (the asset's Plots tab charts them across materializations), and the manifest's path."""
    md: Metadata = {}
    rows = next((k for k in ROWS if isinstance(summary.get(k), int)), None)
    for key, value in summary.items():
        if key in SKIPPED or key == "sources":  # sources: a table of their own (fetch)
            continue
        if key == rows:
            md["dagster/row_count"] = _v(value, "int")
        elif key == "manifest" and isinstance(value, str):
            md["manifest"] = _v(str((root / value).resolve()), "path")
        elif key == "dropped" and isinstance(value, dict):
            md["dropped"] = _v(sum(value.values()), "int")
            for reason, n in sorted(value.items()):
                md[f"dropped_{reason}"] = _v(n, "int")
        elif key in ("duplicates", "pii", "contaminated", "excluded") and isinstance(value, dict):
            for sub, n in sorted(value.items()):
                md[f"{key}_{sub}"] = _scalar(n)
        else:
            md[key] = _scalar(value)
    share = dedup_share(summary)
    if share is not None:
        md["dedup_removed_share"] = _v(share, "float")
    return md


def dedup_share(summary: dict[str, Any]) -> float | None:
    """The share of the documents the filters kept that deduplication removed (0 to 1)."""
    dupes, out = summary.get("duplicates"), summary.get("documents_out")
    if not isinstance(dupes, dict) or not isinstance(out, int):
        return None
    removed = sum(dupes.values())
    return round(removed / (out + removed), 6) if out + removed else 0.0


def count(n: int) -> str:
    """A count as people read it: `119,280` (in the summary line, never a metadata value)."""
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
    """What a person asks of a build: which config, which inputs, which files, their bytes."""
    md: Metadata = {}
    if config is not None:
        md["config"] = _v(_json_block(config), "md")
    stage = summary.get("stage")
    if stage == "fetch":
        sources = summary.get("sources", [])
        md["text_bytes"] = _v(sum(int(s.get("text_bytes", 0)) for s in sources), "int")
        md["sources"] = _fetched_sources(sources, root)
    manifest = summary.get("manifest")
    if isinstance(manifest, str) and (root / manifest).is_file():
        doc = json.loads((root / manifest).read_text(encoding="utf-8"))
        md["manifest_sha256"] = _v(file_sha256(root / manifest), "text")
        files = doc.get("shards") or doc.get("files") or []
        md["files"] = _files_table(files, stage == "tokenize")
        md["files_bytes"] = _v(sum(int(f.get("bytes", 0)) for f in files), "int")
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


def summary_line(summary: dict[str, Any], md: Metadata) -> str:
    """One Markdown line for people: the stage's main numbers, formatted (the metadata values
    stay numbers)."""
    n: dict[str, int] = {}
    for key, value in md.items():
        raw = value["raw_value"]
        if isinstance(raw, int) and not isinstance(raw, bool):
            n[key] = raw
    rows = count(n.get("dagster/row_count", 0))
    on_disk = f" ({human_size(n['files_bytes'])} on disk)" if "files_bytes" in n else ""
    stage = summary.get("stage")
    if stage == "fetch":
        sources = len(summary.get("sources", []))
        return (
            f"**{rows}** documents, {human_size(n.get('text_bytes', 0))} of text, from "
            f"{sources} source{'s' if sources != 1 else ''}"
        )
    if stage == "shard":
        removed = sum(v for k, v in n.items() if k.startswith("duplicates_"))
        share = dedup_share(summary) or 0.0
        return (
            f"**{rows}** documents kept of {count(n.get('documents_in', 0))}: "
            f"{count(n.get('dropped', 0))} dropped by the filters, {count(removed)} duplicates "
            f"removed ({100 * share:.1f} %); {human_size(n.get('text_bytes_out', 0))} of text "
            f"in {count(n.get('shards', 0))} shards{on_disk}"
        )
    if stage == "tokenize":
        return (
            f"**{count(n.get('tokens', 0))}** tokens in {rows} documents "
            f"from {count(n.get('shards', 0))} shards{on_disk}"
        )
    return f"**{rows}** rows"


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


def _fetched_sources(sources: list[dict[str, Any]], root: Path) -> PipesMetadataValue:
    """Per fetched source: name, license, path, input sha256, documents, text bytes."""
    from corpus_assets.core.stages.fetch import SOURCE_FILE  # the fetch stage has it loaded

    rows = []
    for source in sources:
        record = Layout(root).raw_source(str(source.get("source_key"))) / SOURCE_FILE
        doc = json.loads(record.read_text(encoding="utf-8")) if record.is_file() else {}
        spec = doc.get("spec", {})
        rows.append(
            {
                "name": doc.get("source"),
                "license": doc.get("license"),
                "path": spec.get("path") or spec.get("hf") or spec.get("url"),
                "input_sha256": doc.get("input_sha256"),
                "documents": int(source.get("documents", 0)),
                "text_bytes": int(source.get("text_bytes", 0)),
                "cached": bool(source.get("cached")),
            }
        )
    columns = [
        ("name", "string"),
        ("license", "string"),
        ("path", "string"),
        ("input_sha256", "string"),
        ("documents", "int"),
        ("text_bytes", "int"),
        ("cached", "bool"),
    ]
    return _table(rows, columns)


def _files_table(files: list[dict[str, Any]], tokens: bool) -> PipesMetadataValue:
    """One row per shard or token file: name, documents, tokens, bytes, sha256."""
    rows = []
    for f in files:
        # an .idx file holds the offsets of its .bin's documents: their counts are on the .bin row
        counted = not str(f.get("name", "")).endswith(".idx")
        documents = f.get("rows", f.get("documents"))
        rows.append(
            {
                "name": f.get("name"),
                "documents": documents if counted and isinstance(documents, int) else None,
                **({"tokens": f["tokens"] if counted else None} if tokens else {}),
                "bytes": int(f.get("bytes", 0)),
                "sha256": f.get("sha256"),
            }
        )
    columns = [("name", "string"), ("documents", "int")]
    columns += [("tokens", "int")] if tokens else []
    columns += [("bytes", "int"), ("sha256", "string")]
    return _table(rows, columns)


def task_metadata(snapshot: Path) -> Metadata:
    """Asset metadata of a task snapshot: its id, counts per step (numbers, each once; the
    selected tasks are its rows), a summary line, selection, calibration."""
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
    }
    steps = ", ".join(f"{count(n)} {step}" for step, n in counts.items() if step != "generated")
    md: Metadata = {
        "summary": _v(
            f"**{count(manifest['rows'])}** tasks selected of {count(counts['generated'])} "
            f"generated ({steps})",
            "md",
        ),
        "dataset_id": _v(manifest["dataset_id"], "text"),
        "dataset_path": _v(str(snapshot.resolve()), "path"),
        "dagster/row_count": _v(manifest["rows"], "int"),
        **{step: _v(int(n), "int") for step, n in counts.items()},
        "config": _v(_json_block(manifest["config"]), "md"),
        "config_sha256": _v(manifest["job"]["config_sha256"], "text"),
        "calibrated_selection": _v(bool(report["calibrated"]), "bool"),
        "selection_statistics": _v(report["selection"]["statistics"], "json"),
    }
    builds = manifest.get("sources", {}).get("corpus_inputs") or []
    if builds:
        md["corpus_builds"] = _corpus_builds(builds)
    if manifest.get("calibration") is not None:
        md["calibration"] = _v(manifest["calibration"], "json")
    return md


def _corpus_builds(builds: list[dict[str, Any]]) -> PipesMetadataValue:
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


def _scalar(value: Any) -> PipesMetadataValue:
    if isinstance(value, bool):
        return _v(value, "bool")
    if isinstance(value, int):
        return _v(value, "int")
    if isinstance(value, float):
        return _v(value, "float")
    if isinstance(value, str):
        return _v(value, "text")
    return _v(value, "json")


def _table(records: list[dict[str, Any]], columns: list[tuple[str, str]]) -> PipesMetadataValue:
    schema = [{"name": name, "type": kind} for name, kind in columns]
    return _v({"records": records, "schema": schema}, "table")


def _v(raw: Any, kind: PipesMetadataType) -> PipesMetadataValue:
    return {"raw_value": raw, "type": kind}
