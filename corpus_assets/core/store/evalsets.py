"""Readers for decontamination eval sets and exclusion id lists: they yield records, never write."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from corpus_assets.core.config import EvalSetSpec, IdListSpec
from corpus_assets.core.errors import ConfigError, DataError, TransientError

EVAL_SUFFIXES = (".jsonl", ".json", ".parquet")


def records(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, record) of a JSONL or Parquet file, streamed; a bad line is a DataError."""
    if path.suffix == ".parquet":
        try:
            pf = pq.ParquetFile(path)
        except Exception as exc:  # pyarrow raises several types for a corrupt file
            raise DataError(f"{path}: not a readable Parquet file: {exc}") from None
        row = 0
        for batch in pf.iter_batches(batch_size=4096):
            for record in batch.to_pylist():
                row += 1
                yield f"{path}: row {row}", record
        return
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                record = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise DataError(f"{where}: not a JSON line: {exc}") from None
            if not isinstance(record, dict):
                raise DataError(f"{where}: a JSON line must be an object")
            yield where, record


def eval_item(
    spec: EvalSetSpec, where: str, row: int, record: dict[str, Any]
) -> tuple[str, list[str]]:
    """(item id, texts of its fields); a missing field is a ConfigError naming the fields there."""
    texts: list[str] = []
    for name in spec.fields:
        if name not in record:
            raise ConfigError(
                f"eval set {spec.name!r}: {where}: no field {name!r}; "
                f"fields: {', '.join(sorted(record)) or 'none'}"
            )
        texts.extend(_strings(record[name]))
    if spec.id_field is None:
        return str(row), texts
    if record.get(spec.id_field) is None:
        raise ConfigError(
            f"eval set {spec.name!r}: {where}: no value for id_field {spec.id_field!r}"
        )
    return str(record[spec.id_field]), texts


def _strings(value: Any) -> list[str]:
    """The text of a field: a string, the strings in a list (answer options), else its JSON."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [json.dumps(value, ensure_ascii=False)]


def eval_items(spec: EvalSetSpec, path: Path | None) -> Iterator[tuple[str, list[str]]]:
    """Every item of an eval set: a local file, else the hub dataset (needs the network)."""
    if path is not None:
        for row, (where, record) in enumerate(records(path)):
            yield eval_item(spec, where, row, record)
        return
    for row, record in enumerate(_hub_records(spec)):
        yield eval_item(spec, f"{spec.hf} ({spec.split}) row {row}", row, record)


def _hub_records(spec: EvalSetSpec) -> Iterator[dict[str, Any]]:
    import datasets  # slow import, only for hub eval sets

    datasets.logging.set_verbosity(datasets.logging.CRITICAL)
    try:
        ds = datasets.load_dataset(spec.hf, name=spec.subset, split=spec.split, streaming=True)
        for record in ds:
            yield dict(record)
    except (ConnectionError, TimeoutError, OSError) as exc:
        if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
            raise ConfigError(  # offline, every retry fails the same way (as for tokenizers)
                f"eval set {spec.name!r}: {spec.hf!r} is not cached and HF_HUB_OFFLINE is set; "
                "go online once, or use a local path"
            ) from None
        raise TransientError(f"eval set {spec.name!r}: cannot reach {spec.hf!r}: {exc}") from None
    except ValueError as exc:  # includes datasets' DatasetNotFoundError
        raise ConfigError(f"eval set {spec.name!r}: cannot load {spec.hf!r}: {exc}") from None


def id_list(spec: IdListSpec, path: Path) -> Iterator[str]:
    """The ids of an id list: `.jsonl` records' `id_field`, else one id per non-blank line."""
    if path.suffix in (".jsonl", ".parquet"):
        for where, record in records(path):
            if record.get(spec.id_field) is None:
                raise ConfigError(
                    f"exclude list {spec.name!r}: {where}: no value for id_field {spec.id_field!r}"
                )
            yield str(record[spec.id_field])
        return
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            try:
                text = line.decode("utf-8").strip()
            except UnicodeDecodeError:
                raise DataError(f"exclude list {spec.name!r}: {path}:{lineno}: not UTF-8") from None
            if text:
                yield text
