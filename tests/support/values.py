"""Values rewritten without changing what they mean, and example scripts loaded as modules."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path
from types import ModuleType
from typing import Any

STANDIN_MODEL = Path(__file__).resolve().parents[2] / "examples" / "tasks" / "standin_model.py"


def shuffled(value: Any, rng: random.Random) -> Any:
    """The same value with every mapping's keys in a random order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


def standin_model() -> ModuleType:
    """examples/tasks/standin_model.py loaded as the module `standin_model`."""
    spec = importlib.util.spec_from_file_location("standin_model", STANDIN_MODEL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
