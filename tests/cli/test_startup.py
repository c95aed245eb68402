"""Stage subprocesses start fast: the `corpus` CLI imports Dagster only where it needs it.

Wall times are noisy on shared machines; what is pinned here is the set of modules loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

WriteConfig = Callable[[Path, Mapping[str, Any]], Path]

# Heavy imports a stage over local files must not pay for.
HEAVY = ("dagster", "dagster_webserver", "dagster_graphql", "datasets", "torch", "tokenizers")

MODULES_AFTER = """
import json, runpy, sys
sys.argv = ["corpus", *json.loads(sys.argv[1])]
code = 0
try:
    runpy.run_module("corpus_assets.cli", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
sys.stdout.flush()
top = sorted({name.split(".")[0] for name in sys.modules})
print("\\n" + json.dumps({"code": code, "modules": top}))
"""


def _loaded_by(*args: str | Path, cwd: Path | None = None) -> tuple[int, set[str]]:
    """Run `corpus ARGS` in a fresh interpreter; its exit code and top-level modules loaded."""
    out = subprocess.run(
        [sys.executable, "-c", MODULES_AFTER, json.dumps([str(a) for a in args])],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    return report["code"], set(report["modules"])


def test_importing_the_cli_loads_no_dagster() -> None:
    probe = (
        "import sys, json, corpus_assets.cli; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    assert "corpus_assets" in loaded
    assert not loaded & set(HEAVY)  # dagster_pipes is allowed: it is tiny and has no deps


def test_importing_the_cli_stays_light() -> None:
    """`corpus run` must start in well under 0.3 s: numpy alone costs ~0.2 s to import, so the
    CLI module (and the package `__init__` it runs) import data libraries only inside commands."""
    probe = (
        "import sys, json, corpus_assets.cli; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    assert not loaded & {"numpy", "pyarrow", "pandas", "pydantic", "filelock"}


def test_help_loads_no_dagster() -> None:
    code, loaded = _loaded_by("run", "--help")
    assert code == 0
    assert not loaded & set(HEAVY)


def test_hash_loads_no_dagster(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('{"dataset": "a", "version": "v1", "tokenizer": {"id": "bytes"}}')
    code, loaded = _loaded_by("hash", path)
    assert code == 0
    assert "pydantic" in loaded  # the probe really ran the command
    assert not loaded & set(HEAVY)


def test_fetch_stage_loads_no_dagster_and_no_datasets(
    tmp_path: Path, write_config: WriteConfig
) -> None:
    (tmp_path / "in.jsonl").write_text('{"text": "one document"}\n')
    cfg = write_config(
        tmp_path / "c.toml",
        {
            "dataset": "a",
            "version": "v1",
            "tokenizer": {"id": "bytes"},
            "sources": [{"name": "s", "kind": "jsonl", "path": "in.jsonl", "license": "mit"}],
        },
    )
    code, loaded = _loaded_by("run", "--stage", "fetch", "--config", cfg, "--root", tmp_path / "r")
    assert code == 0
    assert (tmp_path / "r" / "raw" / "LEDGER.jsonl").exists()  # the stage really ran
    assert "pyarrow" in loaded
    assert not loaded & set(HEAVY)
