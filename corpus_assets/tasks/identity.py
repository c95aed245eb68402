"""A data job's resume identity: what must be unchanged for a job to continue where it was.

The config's sha256, the bytes of every declared input and exclusion file, the recipe's
`source_files()` (or the factory's module) and the executor's own code. A stored identity is
compared key by key, so the refusal names what changed.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from corpus_assets.core.errors import DataError
from corpus_assets.core.store.digests import file_sha256
from corpus_assets.tasks.config import LoadedJobConfig
from corpus_assets.tasks.factory import load_factory
from corpus_assets.tasks.types import Recipe
from corpus_assets.tasks.workers import RecipeError, RecipeSpec

PACKAGE = Path(__file__).resolve().parent
_IMPORT = re.compile(  # what ruff lets through: absolute imports, one module per `import`
    r"^[ \t]*(?:import[ \t]+(corpus_assets\.core(?:\.\w+)*)"
    r"|from[ \t]+(corpus_assets\.core(?:\.\w+)*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*))",
    re.MULTILINE,
)


def executor_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the tasks package and every `corpus_assets.core` module it imports,
    directly or through other core modules (with their packages' `__init__.py`), by the
    path relative to the folder holding `corpus_assets`; found by walking, never listed."""
    root = package.parent.parent
    found = {str(p.relative_to(root)): p for p in sorted(package.rglob("*.py"))}
    pending = list(found.values())
    while pending:
        for module in _core_imports(pending.pop()):
            for path in _module_files(root, module):
                name = str(path.relative_to(root))
                if name not in found:
                    found[name] = path
                    pending.append(path)
    return dict(sorted(found.items()))


def _core_imports(path: Path) -> Iterator[str]:
    """The `corpus_assets.core` modules `path` imports, anywhere in it (lazy imports too);
    for `from package import name`, both the package and `package.name`."""
    for match in _IMPORT.finditer(path.read_text(encoding="utf-8")):
        plain, source, names = match.groups()
        if plain:
            yield plain
            continue
        yield source
        for name in names.strip("()").split(","):
            words = name.split("#")[0].split()
            if words:
                yield f"{source}.{words[0]}"


def _module_files(root: Path, module: str) -> Iterator[Path]:
    """The files importing `module` runs: each package's `__init__.py` on the way, then the
    module's own file (nothing for a name that is not a module, such as a class)."""
    parts = module.split(".")
    for depth in range(2, len(parts) + 1):
        folder = root.joinpath(*parts[:depth])
        if (folder / "__init__.py").is_file():
            yield folder / "__init__.py"
        elif folder.with_suffix(".py").is_file():
            yield folder.with_suffix(".py")


def executor_digest(package: Path = PACKAGE) -> str:
    """sha256 over the executor's code, `executor_files` (part of a job's resume identity)."""
    h = hashlib.sha256()
    for name, path in executor_files(package).items():
        h.update(f"{name}\0{file_sha256(path)}\n".encode())
    return h.hexdigest()


def recipe_files(spec: RecipeSpec, recipe: Recipe) -> dict[str, str]:
    """sha256 per file the recipe declares in `source_files()` (else its factory's module)."""
    declared = getattr(recipe, "source_files", None)
    if not callable(declared):
        return factory_files(spec.factory)
    paths = [Path(p).resolve() for p in declared()]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise RecipeError(f"recipe source_files() names missing file(s): {', '.join(missing)}")
    return _digests(paths)


def factory_files(ref: str) -> dict[str, str]:
    """sha256 of the module that defines the `module:callable` factory `ref`."""
    module = inspect.getmodule(load_factory(ref))
    return _digests([Path(inspect.getfile(module)).resolve()] if module else [])


def _digests(paths: Sequence[Path]) -> dict[str, str]:
    """sha256 per file, named relative to the files' common folder."""
    if not paths:
        return {}
    base = Path(os.path.commonpath([p.parent for p in paths]))
    return {str(p.relative_to(base)): file_sha256(p) for p in sorted(paths)}


def job_identity(
    config: LoadedJobConfig, spec: RecipeSpec, recipe: Recipe, calibrator: object = None
) -> dict[str, Any]:
    """What a resumed job must find unchanged: config, declared files, recipe, calibrator and
    executor code."""
    return {
        "config_sha256": config.sha256,
        "inputs": _file_digests(config.model.file_inputs, config.inputs),
        "exclusions": _file_digests(config.model.exclusions, config.exclusions),
        "recipe_files": recipe_files(spec, recipe),
        "calibration_files": calibration_files(config, calibrator),
        "executor": executor_digest(),
    }


def calibration_files(config: LoadedJobConfig, calibrator: object) -> dict[str, str]:
    """sha256 of the calibration factory's module and of the files the calibrator declares in
    `source_files()` (the recorded reports), named relative to the config's folder if inside."""
    spec = config.model.calibration
    if spec is None:
        return {}
    declared = getattr(calibrator, "source_files", None)
    files = {}
    for path in (Path(p).resolve() for p in declared()) if callable(declared) else ():
        if not path.is_file():
            raise DataError(f"calibration file {path} not found")
        name = path.relative_to(config.base_dir) if path.is_relative_to(config.base_dir) else path
        files[str(name)] = file_sha256(path)
    return factory_files(spec.implementation) | files


def _file_digests(written: Sequence[str], paths: Sequence[Path]) -> dict[str, str]:
    return {w: file_sha256(p) for w, p in zip(written, paths, strict=True)}


def identity_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between a stored identity and the current one, as short phrases."""
    changes = []
    if old.get("config_sha256") != new["config_sha256"]:
        changes.append(
            f"the job config (sha256 {str(old.get('config_sha256'))[:12]}… is now "
            f"{new['config_sha256'][:12]}…)"
        )
    for key, what in (
        ("inputs", "input"),
        ("exclusions", "exclusion"),
        ("recipe_files", "recipe source"),
        ("calibration_files", "calibration"),
        ("corpus_inputs", "corpus input"),
    ):
        before, after = old.get(key) or {}, new.get(key) or {}
        for name in sorted(set(before) | set(after)):
            if before.get(name) != after.get(name):
                state = (
                    "added" if name not in before else "removed" if name not in after else "changed"
                )
                changes.append(f"{what} file {name!r} {state}")
    if old.get("executor") != new["executor"]:
        changes.append("the executor's code (corpus_assets/tasks and the core modules it imports)")
    return changes


def read_exclusions(paths: Sequence[Path]) -> Iterator[str]:
    """Task ids from JSONL exclusion files: each line an object with a string `task_id`."""
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    doc = json.loads(line)
                except ValueError:
                    raise DataError(f"exclusion file {path} line {number}: not JSON") from None
                if not isinstance(doc, dict) or not isinstance(doc.get("task_id"), str):
                    raise DataError(
                        f"exclusion file {path} line {number}: needs a top-level string "
                        "'task_id' (a snapshot's public.jsonl works)"
                    )
                yield doc["task_id"]


def changed_message(path: Path, changes: list[str]) -> str:
    return (
        f"cannot resume {path}: its identity changed: {'; '.join(changes)}; "
        "restore them or start a new job in a new folder"
    )
