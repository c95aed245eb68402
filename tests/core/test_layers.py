"""The core's layers import only downward: stages → text → store → config, errors, version."""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "corpus_assets" / "core"
# A module may import from its own layer and from every layer after it, never from one before.
LAYERS = ["stages", "text", "store", "base"]


def layer_of(module: str) -> str | None:
    """The layer of a `corpus_assets.core...` module name; None outside the core."""
    parts = module.split(".")
    if parts[:2] != ["corpus_assets", "core"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in LAYERS else "base"


def core_imports(path: Path) -> list[tuple[int, str]]:
    """Every core module that `path` imports (at module level or inside a function)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            found += [(node.lineno, n) for n in names if layer_of(n) is not None]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if layer_of(a.name) is not None]
    return found


def test_core_modules_import_only_downward() -> None:
    upward = []
    for path in sorted(CORE.rglob("*.py")):
        rel = path.relative_to(CORE)
        own = rel.parts[0] if len(rel.parts) > 1 else "base"
        for line, name in core_imports(path):
            target = layer_of(name)
            if target is not None and LAYERS.index(target) < LAYERS.index(own):
                upward.append(f"{rel}:{line} ({own}) imports {name} ({target})")
    assert upward == []


def test_the_layer_rule_sees_an_upward_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from corpus_assets.core.stages.shard import shard\n")
    assert core_imports(probe) == [
        (2, "corpus_assets.core.stages.shard"),
        (2, "corpus_assets.core.stages.shard.shard"),
    ]
    assert layer_of("corpus_assets.core.stages.shard") == "stages"
    assert layer_of("corpus_assets.core.config") == "base"


def test_every_layer_exists() -> None:
    for layer in LAYERS[:-1]:
        assert (CORE / layer / "__init__.py").is_file()
