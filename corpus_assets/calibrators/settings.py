"""The live calibrator's params, checked: a bad one is a ConfigError (exit 64)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from corpus_assets.core.errors import ConfigError
from corpus_assets.tasks.types import JSON


@dataclass(frozen=True)
class Settings:
    """The factory's params, checked."""

    base_url: str
    model: str
    harness_ref: str
    verifier_digest: str
    api_key_env: str | None
    generation: dict[str, JSON]
    timeout_s: float
    max_concurrency: int
    retries: int
    record_dir: Path | None


def check_settings(
    *,
    base_url: str,
    model: str,
    harness_ref: str,
    verifier_digest: str,
    api_key_env: str | None,
    temperature: float | None,
    top_p: float | None,
    max_tokens: int | None,
    seed: int | None,
    stop: Sequence[str] | None,
    request_timeout_s: float,
    max_concurrency: int,
    request_retries: int,
    record_dir: str | None,
    config_dir: str,
) -> Settings:
    """The params as `Settings`, `record_dir` resolved against `config_dir`."""
    for name, value in (("base_url", base_url), ("model", model), ("harness_ref", harness_ref),
                        ("verifier_digest", verifier_digest)):  # fmt: skip
        if not isinstance(value, str) or not value:
            raise ConfigError(f"live_responses: {name} must be a non-empty string")
    if api_key_env is not None and (not isinstance(api_key_env, str) or not api_key_env):
        raise ConfigError("live_responses: api_key_env must name an environment variable")
    generation = _generation(temperature, top_p, max_tokens, seed, stop)
    for name, number, least in (
        ("max_concurrency", max_concurrency, 1),
        ("request_retries", request_retries, 0),
    ):
        if not _integer(number) or number < least:
            raise ConfigError(f"live_responses: {name} must be an integer >= {least}")
    if not _positive(request_timeout_s):
        raise ConfigError("live_responses: request_timeout_s must be a positive number")
    folder = None if record_dir is None else (Path(config_dir) / record_dir).resolve()
    return Settings(
        base_url, model, harness_ref, verifier_digest, api_key_env, generation,
        float(request_timeout_s), max_concurrency, request_retries, folder,
    )  # fmt: skip


def _generation(
    temperature: object, top_p: object, max_tokens: object, seed: object, stop: object
) -> dict[str, JSON]:
    """The generation settings that are set, checked; sent with every request."""
    checks: dict[str, tuple[object, Callable[[object], bool], str]] = {
        "temperature": (temperature, _nonnegative, "a number >= 0"),
        "top_p": (top_p, _fraction, "a number in (0, 1]"),
        "max_tokens": (max_tokens, _count, "an integer >= 1"),
        "seed": (seed, _integer, "an integer"),
        "stop": (stop, _strings, "a list of strings"),
    }
    found: dict[str, JSON] = {}
    for name, (value, ok, allowed) in checks.items():
        if value is None:
            continue
        if not ok(value):
            raise ConfigError(f"live_responses: {name} must be {allowed}")
        found[name] = list(value) if name == "stop" else value  # type: ignore[call-overload]
    return found


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _positive(value: object) -> bool:
    return _nonnegative(value) and float(value) > 0  # type: ignore[arg-type]


def _fraction(value: object) -> bool:
    return _positive(value) and float(value) <= 1  # type: ignore[arg-type]


def _nonnegative(value: object) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        and value >= 0
    )  # fmt: skip


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(s, str) for s in value)
