"""The core knows nothing of Dagster (docs/architecture.md): a fresh interpreter proves it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

IMPORT_ALL = """
import importlib, json, pkgutil, sys
package = importlib.import_module(sys.argv[1])
names = sorted(m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + "."))
for name in names:
    importlib.import_module(name)
print(json.dumps({
    "modules": names,
    "dagster": sorted(m for m in sys.modules if m == "dagster" or m.startswith("dagster.")),
    "pipes": sorted(m for m in sys.modules if m.startswith("dagster_pipes")),
}))
"""


@pytest.mark.parametrize(
    ("package", "sample"),
    [
        ("core", "corpus_assets.core.stages.fetch"),
        ("tasks", "corpus_assets.tasks.config"),
        ("recipes", "corpus_assets.recipes.arithmetic"),
    ],
)
def test_every_module_of_a_pure_package_imports_without_dagster(package: str, sample: str) -> None:
    name = f"corpus_assets.{package}"
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL, name], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, f"a {package} module failed to import:\n{out.stderr}"
    found = json.loads(out.stdout)
    folder = REPO / "corpus_assets" / package
    expected = {
        f"{name}." + ".".join(p.relative_to(folder).with_suffix("").parts)
        for p in folder.rglob("*.py")
        if p.stem not in ("__init__", "__main__")
    }
    assert expected <= set(found["modules"])  # every module was really imported
    assert sample in found["modules"]
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
