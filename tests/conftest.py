"""Shared fixtures: a `corpus` CLI runner (subprocess), a data root, config writers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from support.corpus import run_corpus

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@pytest.fixture(autouse=True)
def _stop_signals_restored(request: pytest.FixtureRequest) -> Any:
    """Each test starts with SIGINT and SIGTERM as pytest had them. A disposition left behind
    (say SIG_IGN) is inherited by every process the later tests start, through exec: a pool
    whose workers ignore SIGTERM never ends. The test that left one is named in a warning."""
    before = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    yield
    for sig, handler in before.items():
        if signal.getsignal(sig) is not handler:
            left = signal.getsignal(sig)
            warnings.warn(f"{request.node.nodeid} left {sig.name} set to {left}", stacklevel=2)
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


# Stage subprocesses must never reach the Hugging Face Hub from tests.
os.environ["HF_HUB_OFFLINE"] = "1"

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"
BENCH = REPO / "bench"

CorpusRunner = Callable[..., subprocess.CompletedProcess[str]]


def toml_value(value: Any) -> str:
    """A TOML inline value for the JSON types a config uses (str, int, float, bool, list, dict)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return toml_key(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def toml_key(key: str) -> str:
    """A TOML basic string: JSON's escapes, plus DEL, which TOML also wants escaped."""
    return json.dumps(key, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_dumps(config: Mapping[str, Any]) -> str:
    """TOML text for a config: scalars first, then [tables] and [[arrays of tables]]."""
    lines: list[str] = []
    tables = {k: v for k, v in config.items() if isinstance(v, dict)}
    arrays = {
        k: v
        for k, v in config.items()
        if isinstance(v, list) and v and all(isinstance(i, dict) for i in v)
    }
    for key, value in config.items():
        if key not in tables and key not in arrays:
            lines.append(f"{toml_key(key)} = {toml_value(value)}")
    for key, table in tables.items():
        lines.append(f"\n[{toml_key(key)}]")
        lines.extend(f"{toml_key(k)} = {toml_value(v)}" for k, v in table.items())
    for key, items in arrays.items():
        for item in items:
            lines.append(f"\n[[{toml_key(key)}]]")
            lines.extend(f"{toml_key(k)} = {toml_value(v)}" for k, v in item.items())
    return "\n".join(lines) + "\n"


def write_config_file(path: Path, config: Mapping[str, Any]) -> Path:
    """Write `config` as JSON or TOML, by the file's suffix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".toml":
        path.write_text(toml_dumps(config), encoding="utf-8")
    else:
        path.write_text(json.dumps(config, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def write_config() -> Callable[[Path, Mapping[str, Any]], Path]:
    """`write_config(path, dict)`: a `.json` or `.toml` config file."""
    return write_config_file


@pytest.fixture(scope="session")
def to_toml() -> Callable[[Mapping[str, Any]], str]:
    return toml_dumps


@pytest.fixture(scope="session")
def corpus() -> CorpusRunner:
    """Run the `corpus` CLI in a subprocess: `corpus("hash", path, env={...})` ->
    CompletedProcess (`env` is set over this process's environment)."""
    return run_corpus


@pytest.fixture
def data_root(tmp_path: Path) -> Path:
    """A data root that does not exist yet (stages create it)."""
    return tmp_path / "data-root"


@pytest.fixture(scope="session")
def repo_data() -> Path:
    """The repository's `data/` (TinyStories sample, Shakespeare plays, GPT-2 tokenizer)."""
    return DATA


@pytest.fixture(scope="session")
def make_corpus_script() -> Path:
    """The repository's benchmark-corpus generator, `bench/make_corpus.py`."""
    return BENCH / "make_corpus.py"
