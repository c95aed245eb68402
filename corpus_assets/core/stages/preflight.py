"""The pre-flight check: everything a build needs from its config, before anything is touched.

`load_config` checks the config's form; `preflight` checks what it names: at least one source,
every local source path matching a file, and a tokenizer that loads (a `tokenizer.json` path, or a
hub id found on the Hub or in the local cache). It writes nothing, so `corpus build`,
`corpus register`, the config sensor and every `corpus run` stage call it before a data root, an
instance, a partition, a run or a fetch exists.

Exit codes: every problem here is a ConfigError (64, never retried), except a Hugging Face Hub
that cannot be reached while online (TransientError, 75: the network may come back). A hub id
that is not cached while `HF_HUB_OFFLINE` is set is 64, not 75: in that environment every retry
fails the same way, and the fetch stage's generous retry policy would only spend minutes of
backoff before saying so; the message says how to fix it (go online once, or set
`tokenizer.path`).
"""

from __future__ import annotations

from corpus_assets.core.config import SOURCE_KINDS, LoadedConfig, SourceSpec, model_kind
from corpus_assets.core.errors import ConfigError, DataError, TransientError
from corpus_assets.core.stages.shard_quality import from_partition
from corpus_assets.core.store.evalsets import eval_item, id_list, records
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.registry import PARTITION_KEY
from corpus_assets.core.store.remote import check_url, is_remote
from corpus_assets.core.store.sources import expand_inputs, is_local
from corpus_assets.core.text.tokenizer import resolve_tokenizer

NO_SOURCES = (
    f"config has no sources; add a [[sources]] table (kinds: {', '.join(SOURCE_KINDS)}) "
    "with name, kind, path and license"
)
LOCAL_PREFIXES = ("/", "./", "../", "~")  # an hf `path` like these is a file, never a hub id


def preflight(cfg: LoadedConfig, layout: Layout | None = None) -> None:
    """Raise one ConfigError naming every problem of `cfg` that would fail its build later
    (with the data root's `layout`, also a classifier partition not trained there)."""
    problems = source_problems(cfg) + screen_problems(cfg) + classifier_problems(cfg, layout)
    try:
        resolve_tokenizer(cfg)
    except ConfigError as exc:
        problems.append(str(exc))
    except TransientError:
        if not problems:  # a retry cannot fix the config problems: report those first
            raise
    if problems:
        raise ConfigError("; ".join(problems))


def source_problems(cfg: LoadedConfig) -> list[str]:
    """No sources at all, or local source paths that match no file (one message each)."""
    if not cfg.model.sources:
        return [NO_SOURCES]
    problems: list[str] = []
    for spec in cfg.model.sources:
        if is_remote(spec.path):
            problems += _url_problems(spec)
            continue
        if not is_local(cfg, spec):
            if _looks_local(spec):
                problems.append(f"source {spec.name!r}: input not found: {cfg.resolve(spec.path)}")
            continue
        try:
            expand_inputs(cfg, spec)
        except ConfigError as exc:
            problems.append(str(exc))
    return problems


def _url_problems(spec: SourceSpec) -> list[str]:
    """A remote source: a URL without credentials, of a kind that reads files."""
    if spec.kind == "hf":
        return [
            f"source {spec.name!r}: kind 'hf' takes a dataset id or local files; for a file on "
            "the Hub use kind jsonl, parquet or text with an hf://datasets/OWNER/NAME/FILE path"
        ]
    try:
        check_url(spec.name, spec.path)
    except ConfigError as exc:
        return [str(exc)]
    return []


def _looks_local(spec: SourceSpec) -> bool:
    return spec.kind == "hf" and spec.path.startswith(LOCAL_PREFIXES)


def screen_problems(cfg: LoadedConfig) -> list[str]:
    """`[decontaminate]` and `[exclude]`: files there, the first eval item has every field."""
    from corpus_assets.core.stages.screen_index import eval_input

    problems: list[str] = []
    sets = cfg.model.decontaminate.sets if cfg.model.decontaminate else ()
    for spec in sets:
        try:
            path = eval_input(cfg, spec)
            first = next(iter(records(path)), None) if path is not None else None
            if path is not None and first is None:
                problems.append(f"eval set {spec.name!r}: {path} holds no items")
            elif first is not None:
                eval_item(spec, first[0], 0, first[1])
        except (ConfigError, DataError) as exc:
            problems.append(str(exc))
    exclude = cfg.model.exclude
    for ids in exclude.ids if exclude else ():
        path = cfg.resolve(ids.path)
        if not path.is_file():
            problems.append(f"exclude list {ids.name!r}: file not found: {path}")
            continue
        try:
            next(iter(id_list(ids, path)), None)
        except (ConfigError, DataError, UnicodeDecodeError) as exc:
            problems.append(f"exclude list {ids.name!r}: {exc}")
    for build in exclude.builds if exclude else ():
        if build.partition is not None and not PARTITION_KEY.match(build.partition):
            problems.append(
                f"exclude build {build.name!r}: {build.partition!r} is not a corpus partition "
                "key; expected <dataset>-<version>-<hash12>"
            )
        if build.manifest is not None and not cfg.resolve(build.manifest).exists():
            problems.append(
                f"exclude build {build.name!r}: no shards manifest at {cfg.resolve(build.manifest)}"
            )
    return problems


def classifier_problems(cfg: LoadedConfig, layout: Layout | None = None) -> list[str]:
    """`[[filters.classifiers]]` model URLs without credentials in them, and with `layout`
    every partition key trained on that data root, its model as its manifest says (a local
    model file is checked as the config loads)."""
    problems: list[str] = []
    for spec in cfg.model.filters.classifiers or ():
        try:
            if model_kind(spec.model) == "url":
                check_url(f"classifier {spec.name}", spec.model)
            elif model_kind(spec.model) == "key" and layout is not None:
                from_partition(layout, spec)
        except ConfigError as exc:
            problems.append(str(exc))
    return problems
