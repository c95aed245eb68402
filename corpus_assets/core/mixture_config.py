"""The mixture config: token builds mixed by weight or token budget into training samples.

A mixture config is TOML or JSON, hashed as a corpus config is (`canon` of the config as written,
defaults not filled in): its `hash12` and `name` make its partition key `<name>-<hash12>` and its
folder `mixtures/<name>-<hash12>/` under the data root.

    name = "web-code"
    seq_len = 2048            # each sample is seq_len + 1 token ids
    seed = 0                  # the shuffle
    validation_share = 0.01   # documents held out, chosen by a hash of their id

    [[components]]
    name = "web"
    tokens = "web-v1-0123456789ab"   # a corpus partition key, a token build folder, or a URL
    weight = 0.7

    [[components]]
    name = "code"
    tokens = "s3://bucket/tokens/gpt2/code/v1/ba9876543210"
    weight = 0.3

Every component has a `weight` (shares of the training tokens, normalized; the total is the most
that upsamples no component, or `total_tokens`), or every one a `token_budget` (its training
tokens; more than it holds is upsampling, counted as epochs).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from corpus_assets.core.classifier_config import CLASSIFIER_NAME, CLASSIFIER_NAME_RULE, CORPUS_KEY
from corpus_assets.core.config import (
    ConfigIdentity,
    _location,
    config_base_dir,
    parse_text,
    read_config_text,
)
from corpus_assets.core.errors import ConfigError, shown

MIXTURE_KEY = r"^[a-z0-9][a-z0-9_-]{0,63}-[0-9a-f]{12}$"
"""A mixture partition key: `<name>-<hash12>`."""
MAX_SEQ_LEN = 1 << 20


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Component(_Section):
    """One `[[components]]` table: a token build and how much of it the mixture takes."""

    name: str = Field(pattern=CLASSIFIER_NAME)
    tokens: str = Field(min_length=1)
    weight: float | None = Field(default=None, gt=0.0)
    token_budget: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _one_amount(self) -> Component:
        if (self.weight is None) == (self.token_budget is None):
            raise ValueError("set exactly one of weight (over 0) or token_budget (tokens, >= 1)")
        return self

    @property
    def kind(self) -> str:
        """How `tokens` names the build: `key` (a corpus partition), `url` or `folder`."""
        if "://" in self.tokens:
            return "url"
        return "key" if CORPUS_KEY.match(self.tokens) else "folder"


class MixtureConfig(_Section):
    """A whole mixture config as validated; identity comes from the raw form."""

    name: str = Field(pattern=CLASSIFIER_NAME)
    seq_len: int = Field(ge=1, le=MAX_SEQ_LEN)
    seed: int = Field(default=0, ge=0, lt=2**63)
    validation_share: float = Field(default=0.0, ge=0.0, lt=1.0)
    total_tokens: int | None = Field(default=None, ge=1)
    components: tuple[Component, ...] = Field(min_length=1, max_length=65535)

    @field_validator("components")
    @classmethod
    def _unique(cls, value: tuple[Component, ...]) -> tuple[Component, ...]:
        names = [c.name for c in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"component names must be unique; repeated: {', '.join(dupes)}")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> MixtureConfig:
        budgets = [c.token_budget is not None for c in self.components]
        if any(budgets) and not all(budgets):
            raise ValueError(
                "every component has a weight, or every one a token_budget; not some of each"
            )
        if all(budgets) and self.total_tokens is not None:
            raise ValueError("total_tokens goes with weights; token budgets are totals already")
        return self

    @property
    def by_budget(self) -> bool:
        return self.components[0].token_budget is not None


@dataclass(frozen=True)
class LoadedMixtureConfig(ConfigIdentity):
    """A validated mixture config with its raw form (the identity) and its folder."""

    raw: dict[str, Any]
    model: MixtureConfig
    base_dir: Path

    @property
    def partition_key(self) -> str:
        return f"{self.model.name}-{self.hash12}"


def validate_mixture(raw: dict[str, Any], base_dir: Path) -> LoadedMixtureConfig:
    """Validate a decoded mixture config; every problem is one clause of one ConfigError."""
    try:
        model = MixtureConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"invalid mixture config: {_explain(exc, raw)}") from None
    return LoadedMixtureConfig(raw=raw, model=model, base_dir=base_dir)


def load_mixture_config(path: str | Path) -> LoadedMixtureConfig:
    """Read and validate a `.toml` or `.json` mixture config file."""
    p = Path(path)
    if p.suffix not in (".toml", ".json"):
        raise ConfigError(f"mixture config file {str(p)!r} must end in .toml or .json")
    raw = parse_text(read_config_text(p, "mixture config file"), p.suffix[1:])
    return validate_mixture(raw, config_base_dir(p))


def _explain(exc: ValidationError, raw: dict[str, Any]) -> str:
    messages = []
    errors = exc.errors()
    failed = {tuple(e["loc"][:1]) for e in errors if len(e["loc"]) > 1}
    for err in errors:
        loc = tuple(err["loc"])
        where = _location(loc, raw)
        if err["type"] == "extra_forbidden":
            parent, key = loc[:-1], loc[-1]
            place = f"[{_location(parent, raw)}]" if parent else "the top level"
            model = Component if parent else MixtureConfig
            messages.append(
                f"unknown key {key!r} in {place}; allowed: {', '.join(model.model_fields)}"
            )
        elif err["type"] == "missing":
            messages.append(f"missing required key {where!r}")
        elif err["type"] == "too_short" and loc == ("components",):
            if loc not in failed:  # not when some of its tables failed (said above)
                messages.append("no component; add at least one [[components]] table")
        elif err["type"] == "string_pattern_mismatch" and loc[-1] == "name":
            messages.append(
                f"{where} {shown(err['input'])} is not a path-safe name; {CLASSIFIER_NAME_RULE}"
            )
        else:
            messages.append(f"{where or 'config'}: {err['msg'].removeprefix('Value error, ')}")
    return "; ".join(messages)
