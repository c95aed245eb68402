"""`corpus_hf` and `task_hf`: Hugging Face `datasets` exports of a corpus build and of a task
snapshot, into `<root>/exports/corpus/<partition>/` and `<root>/exports/tasks/<partition>/`.

Thin wrappers over the exports `corpus export-hf` runs. Each export names its source in
`corpus_source.json`; an export that already names the current source is kept (no work), one
of an older build is replaced. The source is verified before anything is written.
"""

import json
import shutil
from pathlib import Path
from typing import Any

import dagster as dg

from corpus_assets.assets.shards import shards
from corpus_assets.assets.step_failure import one_sentence
from corpus_assets.assets.task_dataset import task_dataset
from corpus_assets.core.errors import UpstreamMissing
from corpus_assets.core.store.atomic import MANIFEST
from corpus_assets.core.store.digests import file_sha256
from corpus_assets.core.version import CODE_VERSION
from corpus_assets.resources.configs import ConfigStore
from corpus_assets.resources.partitions import corpus_configs, task_configs
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.resources.stage_report import SHARD_COLUMNS
from corpus_assets.resources.task_configs import TaskConfigStore

EXPORTS = "exports"
SOURCE = "corpus_source.json"
SAMPLE_ROWS = 3
SAMPLE_CHARS = 200
TASK_HF_COLUMNS = {
    "task_id": "the task's id, as in the snapshot's public.jsonl",
    "messages": "the chat messages the model is given (the recipe's training row)",
    "answer": "the answer the model should give, from the task's private reference",
}
"""What the columns of the shipped recipes' training rows hold; another recipe's other columns
read as "a field of the recipe's training row"."""
OTHER_TASK_COLUMN = "a field of the recipe's training row"


def _source_of(dest: Path) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = json.loads((dest / SOURCE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found


def _fresh(dest: Path, key: str, want: str) -> bool:
    """Whether `dest` holds an export whose source's `key` is `want`; a stale one is removed."""
    source = _source_of(dest)
    if source is not None and source.get(key) == want:
        return True
    if dest.exists():
        shutil.rmtree(dest)
    return False


def dataset_view(
    dest: Path, descriptions: dict[str, str] | None = None, default: str | None = None
) -> dict[str, dg.MetadataValue[Any]]:
    """The exported dataset's column schema and its first rows (long values cut short), read
    from the `save_to_disk` Arrow files without loading `datasets`."""
    import pyarrow as pa

    files = sorted(dest.glob("data-*.arrow"))
    if not files:
        return {}
    with pa.memory_map(str(files[0])) as source:
        reader = pa.ipc.open_stream(source)
        schema = reader.schema
        try:
            rows = reader.read_next_batch().slice(0, SAMPLE_ROWS).to_pylist()
        except StopIteration:  # no rows
            rows = []
    about = descriptions or {}
    columns = [dg.TableColumn(f.name, str(f.type), about.get(f.name, default)) for f in schema]
    sample = [dg.TableRecord({k: _shown(v) for k, v in row.items()}) for row in rows]
    return {
        "dagster/column_schema": dg.MetadataValue.table_schema(dg.TableSchema(columns)),
        "sample": dg.MetadataValue.table(
            sample, dg.TableSchema([dg.TableColumn(f.name, "string") for f in schema])
        ),
    }


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= SAMPLE_CHARS else text[: SAMPLE_CHARS - 1] + "…"


@dg.asset(
    code_version=CODE_VERSION,
    partitions_def=corpus_configs,
    group_name="exports",
    deps=[shards],
    kinds={"python", "huggingface"},
)
def corpus_hf(
    context: dg.AssetExecutionContext, paths: CorpusPaths, configs: ConfigStore
) -> dg.MaterializeResult[Any]:
    """The build's shards as a `datasets` dataset (id, text, source, license) with a card."""
    from corpus_assets.core.stages.export_hf import export_corpus

    with one_sentence(context):
        cfg, layout = configs.load(context.partition_key), paths.layout()
        manifest = layout.shards(cfg) / MANIFEST
        if not manifest.is_file():
            raise UpstreamMissing("shards", f"no shards manifest at {manifest}")
        dest = layout.root / EXPORTS / "corpus" / context.partition_key
        digest = file_sha256(manifest)
        reused = _fresh(dest, "manifest_sha256", digest)
        if not reused:
            export_corpus(manifest, dest, context.log.info)
    source = _source_of(dest) or {}
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(dest)),
            "dagster/row_count": int(source.get("rows", 0)),
            "build_id": str(source.get("build_id")),
            "reused": reused,
            **dataset_view(dest, {name: about for name, _, about in SHARD_COLUMNS}),
        },
        data_version=dg.DataVersion(digest),
    )


@dg.asset(
    code_version=CODE_VERSION,
    partitions_def=task_configs,
    group_name="exports",
    deps=[task_dataset],
    kinds={"python", "huggingface"},
)
def task_hf(
    context: dg.AssetExecutionContext, paths: CorpusPaths, task_configs: TaskConfigStore
) -> dg.MaterializeResult[Any]:
    """The snapshot's training rows as a `datasets` dataset."""
    from corpus_assets.tasks.export import export_hf_dataset
    from corpus_assets.tasks.snapshot import load_snapshot

    with one_sentence(context):
        folder = task_configs.folder_for(context.partition_key) / "dataset"
        if not (folder / "manifest.json").is_file():
            raise UpstreamMissing("task_dataset", f"no snapshot at {folder}")
        snapshot = load_snapshot(folder)
        dest = paths.root_path() / EXPORTS / "tasks" / context.partition_key
        reused = _fresh(dest, "dataset_id", snapshot.dataset_id)
        if not reused:
            export_hf_dataset(snapshot, dest)
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(dest)),
            "dagster/row_count": int(snapshot.manifest["rows"]),
            "dataset_id": snapshot.dataset_id,
            "reused": reused,
            **dataset_view(dest, TASK_HF_COLUMNS, OTHER_TASK_COLUMN),
        },
        data_version=dg.DataVersion(snapshot.dataset_id),
    )
