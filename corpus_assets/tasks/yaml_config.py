"""YAML job configs: `yaml.safe_load` semantics, but duplicate and non-string keys are errors."""

from __future__ import annotations

from typing import Any

import yaml

from corpus_assets.core.config import _check_plain
from corpus_assets.core.errors import ConfigError


class _StrictLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no stubs
    """SafeLoader whose mappings refuse duplicate keys and keys that are not strings."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[str, Any]:
    loader.flatten_mapping(node)
    out: dict[str, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if not isinstance(key, str):
            raise ConfigError(f"YAML key {key!r} on line {line} is not a string; quote it")
        if key in out:
            raise ConfigError(f"duplicate key {key!r} in YAML config (line {line})")
        out[key] = loader.construct_object(value_node, deep=True)
    return out


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error as one line: the problem and where."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"{exc.problem} (line {mark.line + 1}, column {mark.column + 1})"
    return " ".join(str(exc).split())


def parse_yaml(text: str) -> dict[str, Any]:
    """Decode YAML config text into a plain dict of JSON values, else one-line ConfigError."""
    try:
        data: Any = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: safe
    except yaml.YAMLError as exc:
        raise ConfigError(f"config is not valid YAML: {_yaml_problem(exc)}") from None
    except RecursionError:
        raise ConfigError("config YAML is nested too deeply") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config must be a YAML mapping, got {type(data).__name__}")
    try:
        _check_plain(data, "")
    except RecursionError:
        raise ConfigError("config YAML is nested too deeply") from None
    return data
