"""The public API: everything imports from `corpus_assets.tasks`, cheaply; `DataJobConfig` is the
job config in Python with the file's identity; the documented example runs as written, on the
thread and (under `if __name__ == "__main__":`) the process backend. Fresh interpreters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import corpus_assets.tasks as tasks
from corpus_assets.core.errors import EXIT_USAGE, ConfigError
from corpus_assets.tasks import DataJobConfig
from corpus_assets.tasks.config import load_job_config, loaded_config

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "tasks.md"
ARITHMETIC = "corpus_assets.recipes.arithmetic:create_recipe"

# The contract's example, as docs/tasks.md shows it (the test checks that it does).
EXAMPLE = """\
import asyncio

from corpus_assets.tasks import DataJobConfig, run_data_job

config = DataJobConfig(
    recipe="corpus_assets.recipes.arithmetic:create_recipe",
    target_count=64,
    purpose="joint",
    seed=42,
    params={"candidate_count": 128},
)
snapshot = asyncio.run(run_data_job(config, "job"))
rows = snapshot.training_rows()
"""

REPORT = """
import json
print(json.dumps({"rows": len(rows), "dataset_id": snapshot.dataset_id,
                  "first": rows[0], "type": type(rows).__name__}))
"""

PROCESS_SCRIPT = """\
import asyncio
import json

from corpus_assets.tasks import DataJobConfig, run_data_job


def main() -> None:
    config = DataJobConfig(
        recipe="corpus_assets.recipes.arithmetic:create_recipe",
        target_count=64,
        purpose="joint",
        seed=42,
        params={"candidate_count": 128},
        execution={"backend": "process", "max_workers": 2, "batch_size": 16},
    )
    snapshot = asyncio.run(run_data_job(config, "job"))
    rows = snapshot.training_rows()
    print(json.dumps({"rows": len(rows), "dataset_id": snapshot.dataset_id}))


if __name__ == "__main__":
    main()
"""


def python(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter in `cwd`, the package importable as installed, offline."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=300,
        check=False,
    )


def last_json(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return doc


# --- the import surface -------------------------------------------------------------------------


def test_the_names_of_the_contract_import_in_a_fresh_interpreter(tmp_path: Path) -> None:
    names = "DataJobConfig, run_data_job, load_snapshot, export_hf_dataset"
    proc = python(tmp_path, "-c", f"from corpus_assets.tasks import {names}")
    assert proc.returncode == 0, proc.stderr


def test_every_exported_name_resolves_and_is_listed() -> None:
    for name in tasks.__all__:
        assert getattr(tasks, name) is not None, name
    assert set(tasks.__all__) <= set(dir(tasks))
    protocol = {
        "PublicTask",
        "DataSample",
        "GenerateContext",
        "Selection",
        "InsufficientDataError",
        "GenerationShard",
        "SelectionPolicy",
        "RankedCandidate",
        "select_ranked_candidates",
        "Attempt",
        "CalibrationBatch",
        "CalibrationContext",
        "Recipe",
        "Calibrator",
    }
    assert protocol | {"DataJobConfig", "run_data_job", "load_snapshot", "export_hf_dataset"} <= (
        set(tasks.__all__)
    )
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = tasks.nothing  # type: ignore[attr-defined]


def test_importing_the_package_loads_neither_the_executor_nor_pydantic(tmp_path: Path) -> None:
    code = (
        "import sys, json, corpus_assets.tasks; "
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.startswith(('corpus_assets.tasks.', 'pydantic')))))"
    )
    assert json.loads(python(tmp_path, "-c", code).stdout) == []


def test_the_docs_and_readme_import_only_from_the_package() -> None:
    assert textwrap.indent(EXAMPLE, "    ").replace("    \n", "\n") in DOCS.read_text("utf-8")
    for path in (DOCS, REPO / "README.md"):
        text = path.read_text(encoding="utf-8")
        for line in text.splitlines():
            if "from corpus_assets.tasks." in line or "corpus_assets.tasks.run." in line:
                pytest.fail(f"{path.name} imports from a submodule: {line.strip()}")
            if "corpus_assets.tasks.snapshot." in line:
                pytest.fail(f"{path.name} names a submodule's function: {line.strip()}")


# --- DataJobConfig --------------------------------------------------------------------------------


def test_a_python_config_has_the_identity_of_the_file_with_the_same_keys(tmp_path: Path) -> None:
    keys = {
        "recipe": ARITHMETIC,
        "target_count": 64,
        "purpose": "joint",
        "seed": 42,
        "params": {"candidate_count": 128},
    }
    (tmp_path / "job.json").write_text(json.dumps(keys), encoding="utf-8")
    from_file = load_job_config(tmp_path / "job.json")
    in_python = loaded_config(DataJobConfig(**keys))
    assert in_python.partition_key == from_file.partition_key
    assert in_python.raw == from_file.raw == keys  # defaults are not filled in
    # execution is left out of the identity, as in a file; seed=0 written is not seed left out
    assert loaded_config(DataJobConfig(**keys, execution={"max_workers": 2})).sha256 == (
        in_python.sha256
    )
    assert (
        loaded_config(DataJobConfig(**{**keys, "seed": 0})).sha256
        != loaded_config(DataJobConfig(**{k: v for k, v in keys.items() if k != "seed"})).sha256
    )


def test_the_loader_gives_a_data_job_config_with_the_file_folder(tmp_path: Path) -> None:
    (tmp_path / "ids.jsonl").write_text('{"task_id": "x"}\n', encoding="utf-8")
    path = tmp_path / "job.yaml"
    path.write_text(
        f"recipe: {ARITHMETIC}\ntarget_count: 4\npurpose: model\nexclusions: [ids.jsonl]\n",
        encoding="utf-8",
    )
    config = DataJobConfig.from_file(path)
    assert isinstance(config, DataJobConfig)
    assert isinstance(load_job_config(path).model, DataJobConfig)
    assert config.base_dir == tmp_path
    assert loaded_config(config).exclusions == (tmp_path / "ids.jsonl",)
    assert loaded_config(config).sha256 == load_job_config(path).sha256


def test_relative_paths_resolve_against_base_dir_default_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "here").mkdir()
    (tmp_path / "there").mkdir()
    for folder in ("here", "there"):
        (tmp_path / folder / "in.txt").write_text(folder, encoding="utf-8")
    monkeypatch.chdir(tmp_path / "here")
    keys: dict[str, Any] = {"recipe": ARITHMETIC, "target_count": 4, "purpose": "model"}
    default = DataJobConfig(**keys, inputs=["in.txt"])
    assert default.base_dir == tmp_path / "here"
    assert loaded_config(default).inputs == (tmp_path / "here" / "in.txt",)
    there = DataJobConfig(**keys, inputs=["in.txt"], base_dir="../there")
    assert there.base_dir.resolve() == tmp_path / "there"
    assert loaded_config(there).inputs == (tmp_path / "there" / "in.txt",)
    assert "base_dir" not in loaded_config(there).raw  # not part of the identity
    with pytest.raises(ConfigError, match=r"inputs\[0\] = 'gone.txt': not found"):
        loaded_config(DataJobConfig(**keys, inputs=["gone.txt"]))


def test_a_bad_python_config_is_one_config_error_line() -> None:
    with pytest.raises(ConfigError) as info:
        DataJobConfig(recipe="arith", target_count="8", purpose="joint", workers=2)  # type: ignore[arg-type, call-arg]
    message = str(info.value)
    assert info.value.exit_code == EXIT_USAGE
    assert "\n" not in message
    assert "recipe: 'arith' is not a 'module:callable' reference" in message
    assert "target_count: Input should be a valid integer, got '8'" in message
    assert "unknown key 'workers' in the top level" in message
    with pytest.raises(ConfigError, match="not JSON"):
        loaded_config(
            DataJobConfig(
                recipe=ARITHMETIC, target_count=1, purpose="joint", params={"when": object()}
            )
        )


def test_base_dir_is_no_key_of_a_config_file(tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    doc = {"recipe": ARITHMETIC, "target_count": 4, "purpose": "model", "base_dir": "/"}
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown key 'base_dir' in the top level; allowed: "):
        load_job_config(path)


# --- the example, run as written ------------------------------------------------------------------


def test_the_documented_example_runs_as_written(tmp_path: Path) -> None:
    result = last_json(python(tmp_path, "-c", EXAMPLE + REPORT))
    assert result["rows"] == 64
    assert result["type"] == "list"
    assert set(result["first"]) >= {"task_id", "messages", "answer"}
    assert (tmp_path / "job" / "dataset" / "manifest.json").is_file()
    assert tasks.load_snapshot(tmp_path / "job").dataset_id == result["dataset_id"]


def test_the_process_backend_runs_from_a_script_with_a_main_guard(tmp_path: Path) -> None:
    (tmp_path / "thread").mkdir()
    (tmp_path / "process").mkdir()
    (tmp_path / "process" / "make_tasks.py").write_text(PROCESS_SCRIPT, encoding="utf-8")
    process = last_json(python(tmp_path / "process", "make_tasks.py"))
    thread = last_json(python(tmp_path / "thread", "-c", EXAMPLE + REPORT))
    assert process["rows"] == 64
    assert process["dataset_id"] == thread["dataset_id"]  # the backend changes nothing
