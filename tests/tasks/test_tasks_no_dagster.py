"""The task package knows nothing of Dagster (like the core): a fresh interpreter proves it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TASKS = Path(__file__).resolve().parents[2] / "corpus_assets" / "tasks"

IMPORT_ALL_TASKS = """
import importlib, json, pkgutil, sys
import corpus_assets.tasks as tasks
names = sorted(m.name for m in pkgutil.walk_packages(tasks.__path__, tasks.__name__ + "."))
for name in names:
    importlib.import_module(name)
print(json.dumps({
    "modules": names,
    "dagster": sorted(m for m in sys.modules if m == "dagster" or m.startswith("dagster.")),
    "pipes": sorted(m for m in sys.modules if m.startswith("dagster_pipes")),
}))
"""


def test_every_tasks_module_imports_without_dagster() -> None:
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL_TASKS], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, f"a tasks module failed to import:\n{out.stderr}"
    found = json.loads(out.stdout)
    expected = {
        "corpus_assets.tasks." + ".".join(p.relative_to(TASKS).with_suffix("").parts)
        for p in TASKS.rglob("*.py")
        if p.stem not in ("__init__", "__main__")
    }
    assert expected <= set(found["modules"])  # every module was really imported
    assert {"corpus_assets.tasks.config", "corpus_assets.tasks.types"} <= expected
    assert found["dagster"] == []
    assert found["pipes"] == []
