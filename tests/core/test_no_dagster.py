"""The core knows nothing of Dagster (DESIGN §2, STYLE 2): a fresh interpreter proves it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

IMPORT_ALL_CORE = """
import importlib, json, pkgutil, sys
import corpus_assets.core as core
names = sorted(m.name for m in pkgutil.walk_packages(core.__path__, core.__name__ + "."))
for name in names:
    importlib.import_module(name)
print(json.dumps({
    "modules": names,
    "dagster": sorted(m for m in sys.modules if m == "dagster" or m.startswith("dagster.")),
    "pipes": sorted(m for m in sys.modules if m.startswith("dagster_pipes")),
}))
"""


def test_every_core_module_imports_without_dagster() -> None:
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL_CORE], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, f"a core module failed to import:\n{out.stderr}"
    found = json.loads(out.stdout)
    core = REPO / "corpus_assets" / "core"
    expected = {
        "corpus_assets.core." + ".".join(p.relative_to(core).with_suffix("").parts)
        for p in core.rglob("*.py")
        if p.stem != "__init__"
    }
    assert expected <= set(found["modules"])  # every module was really imported
    assert "corpus_assets.core.stages.fetch" in found["modules"]
    assert found["dagster"] == []
    assert found["pipes"] == []


def _ruff_banned_api(filename: str, source: str) -> subprocess.CompletedProcess[str]:
    ruff = Path(sys.executable).parent / "ruff"
    return subprocess.run(
        [str(ruff), "check", "--no-cache", "--select", "TID251", "--stdin-filename", filename, "-"],
        input=source,
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )


def test_ruff_bans_dagster_imports_in_the_core() -> None:
    for source in ("import dagster as dg\n", "from dagster_pipes import open_dagster_pipes\n"):
        probe = _ruff_banned_api("corpus_assets/core/_probe.py", source)
        assert probe.returncode == 1, probe.stdout + probe.stderr
        assert "TID251" in probe.stdout
        assert "must not import Dagster" in probe.stdout


def test_ruff_allows_dagster_in_the_wiring_folders() -> None:
    for filename in ("corpus_assets/assets/raw.py", "corpus_assets/cli.py"):
        probe = _ruff_banned_api(filename, "import dagster as dg\n\nprint(dg)\n")
        assert probe.returncode == 0, probe.stdout + probe.stderr
