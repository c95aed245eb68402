"""The whole package imports only downward, floor by floor, and bench/ has no import circle.

The floors, top to bottom (a module may import from its own floor and from every floor below):

    entry        cli.py, every __main__.py, the package's __init__: the commands people run
    build        build/: `corpus register`, `corpus build`, `corpus ui` driving Dagster
    definitions  definitions.py: the one composition root of the Dagster code location
    sensors      sensors/
    jobs         jobs.py
    assets       assets/: the assets, their checks, the report page, the recheck job's op
    resources    resources/: paths, config stores, the stage runner and its retries, the
                 partitions, and what a stage subprocess tells Dagster through Pipes
    instance     instance/: the Dagster instance's home, PostgreSQL, dead runs, failure records
    recipes      recipes/: task recipes shipped with the package
    calibrators  calibrators/: calibrators shipped with the package (a live model server)
    tasks        tasks/: the task-dataset system (no Dagster)
    core         core/: the stages (no Dagster; its own layers are tests/core/test_layers.py)
    dataset      dataset.py: TokenDataset, the reader of a token build (imports nothing of ours);
                 mixture.py: MixtureDataset, the reader of a mixture (imports dataset.py)
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "corpus_assets"
FLOORS = [
    "entry",
    "build",
    "definitions",
    "sensors",
    "jobs",
    "assets",
    "resources",
    "instance",
    "recipes",
    "calibrators",
    "tasks",
    "core",
    "dataset",
]
PACKAGES = set(FLOORS) - {"entry", "definitions", "jobs", "dataset"}
MODULES = {
    "cli": "entry",
    "definitions": "definitions",
    "jobs": "jobs",
    "dataset": "dataset",
    "mixture": "dataset",
}


def floor_of(module: str) -> str | None:
    """The floor of a `corpus_assets...` module name; None outside the package."""
    parts = module.split(".")
    if parts[0] != "corpus_assets":
        return None
    if len(parts) == 1 or parts[-1] == "__main__":
        return "entry"
    if parts[1] in PACKAGES:
        return parts[1]
    if parts[1] in MODULES:
        return MODULES[parts[1]]
    raise AssertionError(f"{module} is on no floor: add it to FLOORS in {Path(__file__).name}")


def module_of(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """Every module `path` imports (at module level or in a function), relative ones resolved."""
    package = module_of(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            # `from pkg import name` imports pkg, and pkg.name when name is a module
            found.append((node.lineno, base))
            found += [
                (node.lineno, f"{base}.{a.name}") for a in node.names if _is_module(base, a.name)
            ]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
    return found


def _is_module(package: str, name: str) -> bool:
    folder = REPO.joinpath(*package.split("."))
    return (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file()


def downward_violations(paths: list[Path]) -> list[str]:
    upward = []
    for path in paths:
        own = floor_of(module_of(path))
        assert own is not None
        for line, name in imports_of(path):
            target = floor_of(name)
            if target is not None and FLOORS.index(target) < FLOORS.index(own):
                upward.append(f"{path.relative_to(REPO)}:{line} ({own}) imports {name} ({target})")
    return upward


def test_every_module_of_the_package_imports_only_downward() -> None:
    assert downward_violations(sorted(PACKAGE.rglob("*.py"))) == []


def test_an_upward_import_is_seen(tmp_path: Path) -> None:
    """A resource importing an asset module, directly or relatively, is reported."""
    probe = PACKAGE / "resources" / "_floor_probe.py"
    probe.write_text(
        "def f():\n    from corpus_assets.assets import raw\n    from ..jobs import corpus_build\n"
    )
    try:
        found = downward_violations([probe])
    finally:
        probe.unlink()
    where = "corpus_assets/resources/_floor_probe.py"
    assert found == [
        f"{where}:2 (resources) imports corpus_assets.assets (assets)",
        f"{where}:2 (resources) imports corpus_assets.assets.raw (assets)",
        f"{where}:3 (resources) imports corpus_assets.jobs (jobs)",
    ]


def test_every_package_folder_is_on_a_floor() -> None:
    folders = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    loose = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    assert folders <= PACKAGES
    assert loose <= set(MODULES)


def bench_imports() -> dict[str, set[str]]:
    """Each bench script's imports of other bench scripts."""
    bench = REPO / "bench"
    names = {p.stem for p in bench.glob("*.py")}
    return {
        p.stem: {name.split(".")[0] for _, name in imports_of(p)} & names - {p.stem}
        for p in bench.glob("*.py")
    }


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of a graph (each found once, from its smallest name)."""
    found = []

    def walk(start: str, node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                found.append([*path, start])
            elif nxt > start and nxt not in path:
                walk(start, nxt, [*path, nxt])

    for start in sorted(graph):
        walk(start, start, [start])
    return found


def test_bench_has_no_import_circle() -> None:
    assert circles(bench_imports()) == []


def test_a_circle_is_seen() -> None:
    graph = {"bench_a": {"bench_b"}, "bench_b": {"bench_c"}, "bench_c": {"bench_a"}, "x": set()}
    assert circles(graph) == [["bench_a", "bench_b", "bench_c", "bench_a"]]
