"""The resume identity: which files it covers and how a change is named."""

from __future__ import annotations

import hashlib
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from corpus_assets.tasks.identity import (
    executor_digest,
    executor_files,
    identity_changes,
    recipe_files,
)
from corpus_assets.tasks.workers import RecipeError, RecipeSpec

TASKS = Path(__file__).resolve().parents[2] / "corpus_assets" / "tasks"


def _package_copy(tmp_path: Path) -> Path:
    """A copy of `corpus_assets/tasks` and `corpus_assets/core`; the copied tasks package."""
    for name in ("tasks", "core"):
        shutil.copytree(
            TASKS.parent / name,
            tmp_path / "corpus_assets" / name,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    return tmp_path / "corpus_assets" / "tasks"


def test_the_executor_digest_covers_the_package_and_the_core_modules_it_imports() -> None:
    files = executor_files()
    assert {f"corpus_assets/tasks/{p.name}" for p in TASKS.glob("*.py")} <= set(files)
    assert {
        "corpus_assets/tasks/config.py",
        "corpus_assets/tasks/corpus_inputs.py",
        "corpus_assets/tasks/yaml_config.py",
        "corpus_assets/tasks/factory.py",
        "corpus_assets/core/errors.py",
        "corpus_assets/core/store/atomic.py",
        "corpus_assets/core/store/__init__.py",
    } <= set(files)
    assert "corpus_assets/core/stages/fetch.py" not in files  # imported by no tasks module
    h = hashlib.sha256()
    for name, path in files.items():
        h.update(f"{name}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    assert executor_digest() == h.hexdigest()


def test_a_new_tasks_module_changes_the_executor_digest(tmp_path: Path) -> None:
    package = _package_copy(tmp_path)
    before = executor_digest(package)
    assert before == executor_digest()
    (package / "new_step.py").write_text('"""A module no list names."""\n')
    assert executor_digest(package) != before


def test_a_core_module_reached_through_imports_changes_the_executor_digest(
    tmp_path: Path,
) -> None:
    package = _package_copy(tmp_path)
    core = package.parent / "core"
    before = executor_digest(package)
    (core / "stages" / "fetch.py").write_text("# not imported by the tasks package\n")
    assert executor_digest(package) == before
    (core / "helper_probe.py").write_text("# imported through another core module\n")
    assert executor_digest(package) == before
    errors = core / "errors.py"
    errors.write_text(errors.read_text() + "\nfrom corpus_assets.core import helper_probe\n")
    with_import = executor_digest(package)
    assert with_import != before
    (core / "helper_probe.py").write_text("# changed\n")
    assert executor_digest(package) != with_import


def test_declared_source_files_are_digested_relative_to_their_folder() -> None:
    spec = RecipeSpec("corpus_assets.recipes.arithmetic:create_recipe", {})
    files = recipe_files(spec, spec.build())
    assert set(files) == {
        "arithmetic.py",
        "arith_answers.py",
        "arith_families.py",
        "arith_select.py",
    }
    path = TASKS.parent / "recipes" / "arith_select.py"
    assert files["arith_select.py"] == hashlib.sha256(path.read_bytes()).hexdigest()


def _module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> Path:
    path = tmp_path / "identity_probe.py"
    path.write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("identity_probe", None)
    return path


def test_without_source_files_the_factory_module_is_the_recipe_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _module(
        tmp_path,
        monkeypatch,
        """
        class R:
            pass
        def make():
            return R()
    """,
    )
    spec = RecipeSpec("identity_probe:make", {})
    assert recipe_files(spec, object()) == {  # type: ignore[arg-type]
        "identity_probe.py": hashlib.sha256(path.read_bytes()).hexdigest()
    }


def test_a_missing_declared_source_file_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _module(
        tmp_path,
        monkeypatch,
        f"""
        class R:
            def source_files(self):
                return [{str(tmp_path / "gone.py")!r}]
        def make():
            return R()
    """,
    )
    spec = RecipeSpec("identity_probe:make", {})
    recipe = __import__("identity_probe").make()
    with pytest.raises(RecipeError, match=r"gone\.py"):
        recipe_files(spec, recipe)


def test_identity_changes_name_each_difference() -> None:
    old = {
        "config_sha256": "a" * 64,
        "inputs": {"data.txt": "1"},
        "exclusions": {"old.jsonl": "2"},
        "recipe_files": {"r.py": "3", "helper.py": "4"},
        "executor": "5",
    }
    assert identity_changes(old, dict(old)) == []
    new = {
        "config_sha256": "b" * 64,
        "inputs": {"data.txt": "9"},
        "exclusions": {"old.jsonl": "2", "new.jsonl": "7"},
        "recipe_files": {"r.py": "3"},
        "executor": "6",
    }
    assert identity_changes(old, new) == [
        "the job config (sha256 aaaaaaaaaaaa… is now bbbbbbbbbbbb…)",
        "input file 'data.txt' changed",
        "exclusion file 'new.jsonl' added",
        "recipe source file 'helper.py' removed",
        "the executor's code (corpus_assets/tasks and the core modules it imports)",
    ]
