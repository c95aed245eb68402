"""The classifier config: which documents are good (`positive`) and which are not (`negative`),
and how fastText learns the difference.

A classifier config is TOML or JSON, hashed as a corpus config is (`canon` of the config as
written, defaults not filled in): its `hash12` and `name` make its partition key
`<name>-<hash12>` and its folder `classifiers/<name>-<hash12>/` under the data root.

Each `[[positive]]` or `[[negative]]` table is a corpus source (`SourceSpec`: local files,
globs, http(s)://, s3://, hf://, compressed), fetched into the shared raw cache by the fetch
stage, or `{name, shards = "<corpus partition key>"}`: the published shards of a corpus build
under the same data root.

Training runs fastText with one thread: with several, its threads update one model without
locks in an order the scheduler picks, so the same config would give other model bytes; with
one thread and a fixed `seed`, the model file is the same to the byte on every run.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from corpus_assets.core.config import (
    NAME_PATTERN,
    ORIGIN_SUFFIX,
    ConfigIdentity,
    CorpusConfig,
    LoadedConfig,
    SourceSpec,
    TokenizerSpec,
    _location,
    canon,
    config_base_dir,
    parse_text,
    read_config_text,
)
from corpus_assets.core.errors import ConfigError, shown
from corpus_assets.core.secrets import has_masks

CLASSIFIER_NAME = r"^[a-z0-9][a-z0-9_-]{0,63}$"
CLASSIFIER_NAME_RULE = "allowed: lowercase letters, digits, '_', '-' (1-64, starting alphanumeric)"
LABEL = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
CLASSIFIER_KEY = r"^[a-z0-9][a-z0-9_-]{0,63}-[0-9a-f]{12}$"
"""A classifier partition key: `<name>-<hash12>`."""
_NAME = NAME_PATTERN.removeprefix("^").removesuffix("$")
CORPUS_KEY = re.compile(rf"^{_NAME}-{_NAME}-[0-9a-f]{{12}}$")
"""A corpus partition key, `<dataset>-<version>-<hash12>` (the registry's form)."""
DEFAULT_MAX_EXAMPLES = 100_000
CLASSES = ("positive", "negative")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ShardsSource(_Section):
    """A `[[positive]]` or `[[negative]]` table naming a corpus build's published shards."""

    name: str = Field(pattern=CLASSIFIER_NAME)
    shards: str = Field(min_length=1)

    @field_validator("shards")
    @classmethod
    def _partition_key(cls, value: str) -> str:
        if not CORPUS_KEY.match(value):
            raise ValueError(
                f"{shown(value)} is not a corpus partition key; expected <dataset>-<version>-"
                "<hash12> (what `corpus register` prints)"
            )
        return value


def _source_kind(value: Any) -> str:
    return "shards" if isinstance(value, dict) and "shards" in value else "source"


ExampleSource = Annotated[
    Annotated[SourceSpec, Tag("source")] | Annotated[ShardsSource, Tag("shards")],
    Discriminator(_source_kind),
]


class TrainingSpec(_Section):
    """fastText's supervised settings (threads are always 1: see the module docstring)."""

    word_ngrams: int = Field(default=2, ge=1, le=5)
    dim: int = Field(default=16, ge=1, le=1024)
    """The word vectors' size. 16 gives the validation ROC AUC that 64 gives on
    bench/bench_classifier.py's examples, from a quarter of the model, predicting in three
    quarters of the time."""
    epoch: int = Field(default=5, ge=1, le=1000)
    lr: float = Field(default=0.1, gt=0.0, le=10.0)
    min_count: int = Field(default=1, ge=1)
    seed: int = Field(default=0, ge=0, lt=2**31)
    bucket: int = Field(default=2_000_000, ge=1, le=100_000_000)
    """Hash buckets of the word n-grams (fastText's default): the model file holds `bucket`
    x `dim` floats (2,000,000 x 16: 128 MB); a smaller one makes a smaller model."""


class ClassifierConfig(_Section):
    """A whole classifier config as validated; identity comes from the raw form."""

    name: str = Field(pattern=CLASSIFIER_NAME)
    positive: tuple[ExampleSource, ...] = Field(min_length=1)
    negative: tuple[ExampleSource, ...] = Field(min_length=1)
    max_examples: int = Field(default=DEFAULT_MAX_EXAMPLES, ge=1)
    validation_share: float = Field(default=0.1, gt=0.0, lt=1.0)
    lowercase: bool = False
    positive_label: str = Field(default="hq", pattern=LABEL)
    negative_label: str = Field(default="cc", pattern=LABEL)
    training: TrainingSpec = TrainingSpec()

    @model_validator(mode="after")
    def _consistent(self) -> ClassifierConfig:
        if self.positive_label == self.negative_label:
            raise ValueError(
                f"positive_label and negative_label are both {self.positive_label!r}; "
                "the two classes need two labels"
            )
        names = [s.name for s in (*self.positive, *self.negative)]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(
                f"source names must be unique across positive and negative; repeated: "
                f"{', '.join(dupes)}"
            )
        return self

    def sources(self, cls: str) -> tuple[SourceSpec | ShardsSource, ...]:
        """The sources of class `cls` ("positive" or "negative")."""
        return self.positive if cls == "positive" else self.negative

    def label(self, cls: str) -> str:
        return self.positive_label if cls == "positive" else self.negative_label


@dataclass(frozen=True)
class LoadedClassifierConfig(ConfigIdentity):
    """A validated classifier config with its raw form (the identity) and its folder."""

    raw: dict[str, Any]
    model: ClassifierConfig
    base_dir: Path

    @property
    def partition_key(self) -> str:
        return f"{self.model.name}-{self.hash12}"

    def fetch_view(self) -> LoadedConfig:
        """The example sources that are not shards as a corpus config's `[[sources]]`, for the
        fetch stage: each source's raw-cache key is its corpus one (`<name>-<hash of the spec as
        written>`), so a classifier and a corpus naming the same source share its raw cache."""
        specs = [
            s for s in (*self.model.positive, *self.model.negative) if isinstance(s, SourceSpec)
        ]
        written = {s.get("name"): s for c in CLASSES for s in self.raw.get(c, [])}
        model = CorpusConfig(
            dataset=self.model.name,
            version="classifier",
            tokenizer=TokenizerSpec(id="bytes"),
            sources=tuple(specs),
        )
        raw = {"sources": [written[s.name] for s in specs]}
        return LoadedConfig(raw=raw, model=model, base_dir=self.base_dir)


def validate_classifier(raw: dict[str, Any], base_dir: Path) -> LoadedClassifierConfig:
    """Validate a decoded classifier config; every problem is one clause of one ConfigError."""
    try:
        model = ClassifierConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"invalid classifier config: {_explain(exc, raw)}") from None
    return LoadedClassifierConfig(raw=raw, model=model, base_dir=base_dir)


def load_classifier_config(path: str | Path) -> LoadedClassifierConfig:
    """Read and validate a `.toml` or `.json` classifier config file.

    A registered `.json` copy whose URL secrets are masked is read again from the original file
    its origin record names (as `load_config` does), which must still be the same config.
    """
    p = Path(path)
    if p.suffix not in (".toml", ".json"):
        raise ConfigError(f"classifier config file {str(p)!r} must end in .toml or .json")
    raw = parse_text(read_config_text(p, "classifier config file"), p.suffix[1:])
    origin = p.with_name(f"{p.stem}{ORIGIN_SUFFIX}")
    if p.suffix == ".json" and has_masks(raw) and origin.is_file():
        return _with_secrets(p, origin, raw)
    return validate_classifier(raw, config_base_dir(p))


def _with_secrets(p: Path, origin: Path, masked: dict[str, Any]) -> LoadedClassifierConfig:
    try:
        file = Path(json.loads(origin.read_text(encoding="utf-8"))["file"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"unreadable {origin}: {exc}") from None
    cfg = load_classifier_config(file)
    if cfg.masked != canon(masked):
        raise ConfigError(
            f"{file} changed since {p} was registered from it; the registry keeps no secrets: "
            "register the classifier config again from a file with them"
        )
    return cfg


def _explain(exc: ValidationError, raw: dict[str, Any]) -> str:
    messages = []
    errors = exc.errors()
    failed = {tuple(e["loc"][:1]) for e in errors if len(e["loc"]) > 1}
    for err in errors:
        loc = _untagged(tuple(err["loc"]))
        where = _location(loc, raw)
        if err["type"] == "too_short" and loc and loc[0] in CLASSES:
            if loc not in failed:  # not when some of its tables failed (said above)
                messages.append(f"no {loc[0]} source; add at least one [[{loc[0]}]] table")
        elif err["type"] == "extra_forbidden":
            parent, key = loc[:-1], loc[-1]
            place = f"[{_location(parent, raw)}]" if parent else "the top level"
            allowed = ", ".join(_model_at(parent, raw).model_fields)
            messages.append(f"unknown key {key!r} in {place}; allowed: {allowed}")
        elif err["type"] == "missing":
            messages.append(f"missing required key {where!r}")
        elif err["type"] == "string_pattern_mismatch" and loc[-1] == "name":
            messages.append(f"{where} is not a path-safe name; {CLASSIFIER_NAME_RULE}")
        else:
            messages.append(f"{where or 'config'}: {err['msg'].removeprefix('Value error, ')}")
    return "; ".join(messages)


def _untagged(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """A location without the union tag pydantic puts after `positive[i]` / `negative[i]`."""
    if len(loc) > 2 and loc[0] in CLASSES and loc[2] in ("source", "shards"):
        return loc[:2] + loc[3:]
    return loc


def _model_at(parent: tuple[Any, ...], raw: dict[str, Any]) -> type[BaseModel]:
    if parent == ("training",):
        return TrainingSpec
    if len(parent) == 2 and parent[0] in CLASSES:
        entries = raw.get(parent[0])
        entry = entries[parent[1]] if isinstance(entries, list) else None
        return ShardsSource if _source_kind(entry) == "shards" else SourceSpec
    return ClassifierConfig
