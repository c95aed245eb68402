"""`module:callable` references: checked by the job config, imported by `load_factory`."""

from __future__ import annotations

import importlib
import keyword
from collections.abc import Callable
from typing import Any

from corpus_assets.core.errors import ConfigError

EXAMPLE_REF = "corpus_assets.recipes.arithmetic:create_recipe"


def _dotted(text: str) -> bool:
    """`a.b.c` made of Python identifiers (no keywords, no empty parts)."""
    parts = text.split(".")
    return all(p.isidentifier() and not keyword.iskeyword(p) for p in parts)


def split_ref(ref: object) -> tuple[str, str]:
    """`(module, attribute path)` of `"module:callable"`, else ValueError saying the form."""
    if not isinstance(ref, str):
        raise ValueError(f"must be a 'module:callable' string, got {type(ref).__name__}")
    module, sep, attr = ref.partition(":")
    if not sep or not _dotted(module) or not _dotted(attr):
        raise ValueError(
            f"{ref!r} is not a 'module:callable' reference; allowed: dotted Python identifiers, "
            f"one ':' before the callable (e.g. {EXAMPLE_REF!r})"
        )
    return module, attr


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _import(module: str, ref: str) -> Any:
    """The module, or a ConfigError saying it is missing or failed to import."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module == exc.name or module.startswith(exc.name + ".")):
            raise ConfigError(f"module {exc.name!r} not found (from {ref!r})") from None
        raise ConfigError(f"importing {module!r} failed (from {ref!r}): {exc}") from None
    except Exception as exc:  # the module's own code raised: still a bad reference
        detail = _one_line(f"{type(exc).__name__}: {exc}")
        raise ConfigError(f"importing {module!r} failed (from {ref!r}): {detail}") from None


def _callables(obj: Any) -> str:
    """Up to ten public callable names of `obj`, for the 'no attribute' message."""
    names = [n for n in dir(obj) if not n.startswith("_") and callable(getattr(obj, n, None))]
    shown = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")
    return shown or "(none)"


def load_factory(ref: str) -> Callable[..., Any]:
    """Import `"module:callable"` and return the callable; every failure is one ConfigError."""
    try:
        module, attr = split_ref(ref)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    obj = _import(module, ref)
    where = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(
                f"{where!r} has no attribute {part!r} (from {ref!r}); "
                f"callables there: {_callables(obj)}"
            )
        obj, where = getattr(obj, part), f"{where}.{part}"
    if not callable(obj):
        raise ConfigError(f"{ref!r} is a {type(obj).__name__}, not a callable")
    factory: Callable[..., Any] = obj
    return factory
