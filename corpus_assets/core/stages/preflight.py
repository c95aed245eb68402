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

from corpus_assets.core.config import SOURCE_KINDS, LoadedConfig, SourceSpec
from corpus_assets.core.errors import ConfigError, TransientError
from corpus_assets.core.store.sources import expand_inputs, is_local
from corpus_assets.core.text.tokenizer import resolve_tokenizer

NO_SOURCES = (
    f"config has no sources; add a [[sources]] table (kinds: {', '.join(SOURCE_KINDS)}) "
    "with name, kind, path and license"
)
LOCAL_PREFIXES = ("/", "./", "../", "~")  # an hf `path` like these is a file, never a hub id


def preflight(cfg: LoadedConfig) -> None:
    """Raise one ConfigError naming every problem of `cfg` that would fail its build later."""
    problems = source_problems(cfg)
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
        if not is_local(cfg, spec):
            if _looks_local(spec):
                problems.append(f"source {spec.name!r}: input not found: {cfg.resolve(spec.path)}")
            continue
        try:
            expand_inputs(cfg, spec)
        except ConfigError as exc:
            problems.append(str(exc))
    return problems


def _looks_local(spec: SourceSpec) -> bool:
    return spec.kind == "hf" and spec.path.startswith(LOCAL_PREFIXES)
