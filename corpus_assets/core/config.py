"""The corpus config: pydantic models, loading from TOML or JSON, and the content identity."""

from __future__ import annotations

import hashlib
import json
import math
import re
import tomllib
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from corpus_assets.core.errors import ConfigError, shown
from corpus_assets.core.secrets import has_masks, mask_data

NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
NAME_RULE = "allowed: lowercase letters, digits, '.', '_', '-' (1-64, starting alphanumeric)"
STAGES = ("fetch", "shard", "tokenize", "cleanup")
SOURCE_KINDS = ("jsonl", "parquet", "text", "hf")
DEFAULT_LICENSES = (
    "public-domain",
    "cc0-1.0",
    "cc-by-4.0",
    "cc-by-sa-4.0",
    "cdla-sharing-1.0",
    "cdla-permissive-2.0",
    "odc-by-1.0",
    "mit",
    "apache-2.0",
    "bsd-2-clause",
    "bsd-3-clause",
)
DEFAULT_MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
"""`[[sources]] max_document_bytes` unless set: larger than any real document."""
MAX_DOCUMENT_BYTES_CAP = 1024 * 1024 * 1024  # one Arrow string value stays under 2 GiB
DOCUMENT_BYTES_RULE = f"allowed: an integer from 1 to {MAX_DOCUMENT_BYTES_CAP:,} (1 GiB)"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceSpec(_Section):
    """One `[[sources]]` table: where documents come from and under which license."""

    name: str = Field(pattern=NAME_PATTERN)
    kind: str
    path: str = Field(min_length=1)
    license: str = Field(min_length=1)
    text_field: str = "text"
    id_field: str | None = None
    separator: str | None = None
    limit: int | None = Field(default=None, ge=1)
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    split: str = "train"
    subset: str | None = None
    max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES

    @field_validator("max_document_bytes", mode="before")
    @classmethod
    def _document_bytes_in_range(cls, value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{shown(value)} is not a size; {DOCUMENT_BYTES_RULE}")
        if value > MAX_DOCUMENT_BYTES_CAP:
            raise ValueError(f"{value:,} is too large; {DOCUMENT_BYTES_RULE}")
        return value

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value not in SOURCE_KINDS:
            raise ValueError(
                f"unknown source kind {shown(value)}; allowed: {', '.join(SOURCE_KINDS)}"
            )
        return value

    @field_validator("license")
    @classmethod
    def _lower_license(cls, value: str) -> str:
        return value.strip().lower()


_GOPHER = {  # datatrove GopherQualityFilter and GopherRepetitionFilter defaults (Gopher's A1)
    "min_words": 50,
    "max_words": 100_000,
    "min_mean_word_length": 3,
    "max_mean_word_length": 10,
    "max_symbol_word_ratio": 0.1,
    "max_non_alpha_word_ratio": None,  # replaced by datatrove's rule on its tokens:
    "min_alpha_token_ratio": 0.8,  # at least 0.8 of the tokens hold a letter
    "max_bullet_line_ratio": 0.9,
    "max_ellipsis_line_ratio": 0.3,
    "min_stop_words": 2,
    "max_duplicate_line_fraction": 0.3,
    "max_duplicate_line_char_fraction": 0.2,
    "max_duplicate_paragraph_fraction": 0.3,
    "max_duplicate_paragraph_char_fraction": 0.2,
    "max_top_2gram_char_fraction": 0.2,
    "max_top_3gram_char_fraction": 0.18,
    "max_top_4gram_char_fraction": 0.16,
    "max_duplicate_5gram_char_fraction": 0.15,
    "max_duplicate_6gram_char_fraction": 0.14,
    "max_duplicate_7gram_char_fraction": 0.13,
    "max_duplicate_8gram_char_fraction": 0.12,
    "max_duplicate_9gram_char_fraction": 0.11,
    "max_duplicate_10gram_char_fraction": 0.10,
}
_C4 = {  # datatrove C4QualityFilter defaults
    "c4_max_word_length": 1000,
    "c4_remove_citations": True,
    "c4_terminal_punctuation": True,
    "c4_min_words_per_line": 3,
    "c4_lorem_ipsum": True,
    "c4_javascript": True,
    "c4_curly_bracket": True,
    "c4_policy": True,
    "c4_min_sentences": 5,
}
_FINEWEB = {  # datatrove FineWebQualityFilter defaults
    "min_line_punctuation_ratio": 0.12,
    "max_short_line_ratio": 0.67,
    "short_line_length": 30,
    "max_char_duplicate_ratio": 0.01,
    "max_newline_word_ratio": 0.3,
}
FILTER_PRESETS: dict[str, dict[str, Any]] = {"c4": _C4, "fineweb": _FINEWEB, "gopher": _GOPHER}
"""`[filters] preset`: the published thresholds of one reference filter (or a list of them)."""


CLASSIFIER_NAME = r"^[a-z0-9_]{1,64}$"
CLASSIFIER_KEY = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}-[0-9a-f]{12}$")
"""A trained classifier's partition key, `<name>-<hash12>` (its folder: Layout.classifier)."""
MODEL_SUFFIXES = (".bin", ".ftz")
MODEL_SCHEMES = ("http", "https", "s3")


def model_kind(model: str) -> str:
    """`key`, `url` or `path`: how a `[[filters.classifiers]]` model is found (ValueError when
    it is none of them)."""
    scheme = model.split("://", 1)[0] if "://" in model else ""
    if scheme in MODEL_SCHEMES:
        return "url"
    if scheme:
        raise ValueError(f"model URL scheme {scheme!r} is not one of {', '.join(MODEL_SCHEMES)}")
    if CLASSIFIER_KEY.match(model):
        return "key"
    if model.endswith(MODEL_SUFFIXES):
        return "path"
    raise ValueError(
        f"model {shown(model)} is none of: a classifier partition key <name>-<hash12>, "
        "a local .bin/.ftz file, an http(s)/s3 URL"
    )


class ClassifierFilter(_Section):
    """One `[[filters.classifiers]]` table: a fastText quality classifier, its score of every
    document kept in the column `quality_<name>`, and a threshold (`min_score`) or a share of
    the deduplicated corpus to keep (`keep_top`)."""

    name: str
    model: str = Field(min_length=1)
    label: str | None = Field(default=None, min_length=1)
    lowercase: bool | None = None
    min_score: float | None = Field(default=None, ge=0.0, le=1.0)
    keep_top: float | None = Field(default=None, gt=0.0, le=1.0)
    model_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")

    @field_validator("name")
    @classmethod
    def _column_name(cls, value: str) -> str:
        if not re.fullmatch(CLASSIFIER_NAME, value):
            raise ValueError(
                f"classifier name {shown(value)} cannot name a column quality_<name>; "
                "allowed: lowercase letters, digits, '_' (1-64)"
            )
        return value

    @field_validator("model")
    @classmethod
    def _model_kind(cls, value: str) -> str:
        model_kind(value)
        return value

    @model_validator(mode="after")
    def _one_cut(self) -> ClassifierFilter:
        if (self.min_score is None) == (self.keep_top is None):
            raise ValueError(
                "set exactly one of min_score (0 to 1) or keep_top (a share over 0, up to 1)"
            )
        kind = model_kind(self.model)
        if kind == "url" and self.model_sha256 is None:
            raise ValueError("a model URL needs model_sha256 (the sha256 of the file it serves)")
        if kind != "key" and self.label is None:
            raise ValueError(
                "label is required for a model file (the default "
                "label comes from a trained classifier's manifest)"
            )
        return self


class FilterSpec(_Section):
    """Quality filters; every threshold can be set, `null` turns one off. The rules past
    `max_non_alpha_word_ratio` are off unless set or named by a `preset`."""

    enabled: bool = True
    preset: str | tuple[str, ...] | None = None
    min_chars: int | None = 50
    max_chars: int | None = 1_000_000
    min_words: int | None = 10
    max_words: int | None = 200_000
    min_mean_word_length: float | None = 2.5
    max_mean_word_length: float | None = 10.0
    max_symbol_word_ratio: float | None = 0.1
    max_duplicate_line_fraction: float | None = 0.5
    max_duplicate_line_char_fraction: float | None = 0.3
    max_non_alpha_word_ratio: float | None = 0.2
    # Gopher repetition
    max_duplicate_paragraph_fraction: float | None = None
    max_duplicate_paragraph_char_fraction: float | None = None
    max_top_2gram_char_fraction: float | None = None
    max_top_3gram_char_fraction: float | None = None
    max_top_4gram_char_fraction: float | None = None
    max_duplicate_5gram_char_fraction: float | None = None
    max_duplicate_6gram_char_fraction: float | None = None
    max_duplicate_7gram_char_fraction: float | None = None
    max_duplicate_8gram_char_fraction: float | None = None
    max_duplicate_9gram_char_fraction: float | None = None
    max_duplicate_10gram_char_fraction: float | None = None
    # Gopher quality
    max_bullet_line_ratio: float | None = None
    max_ellipsis_line_ratio: float | None = None
    min_stop_words: int | None = None
    min_alpha_token_ratio: float | None = None  # of spaCy-like tokens (core/text/en_words.py)
    # C4 quality: line rules remove lines (the text changes), the rest drop the document
    c4_max_word_length: int | None = None
    c4_remove_citations: bool | None = None
    c4_terminal_punctuation: bool | None = None
    c4_min_words_per_line: int | None = None
    c4_lorem_ipsum: bool | None = None
    c4_javascript: bool | None = None
    c4_curly_bracket: bool | None = None
    c4_policy: bool | None = None
    c4_min_sentences: int | None = None
    # FineWeb quality
    min_line_punctuation_ratio: float | None = None
    max_short_line_ratio: float | None = None
    short_line_length: int | None = Field(default=30, ge=0)
    max_char_duplicate_ratio: float | None = None
    max_newline_word_ratio: float | None = None
    # language identification (fastText lid.176): off unless `languages` names some
    languages: tuple[str, ...] | None = Field(default=None, min_length=1)
    min_language_score: float | None = Field(default=0.65, ge=0.0, le=1.0)  # None: 0
    language_model_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    # boilerplate across documents (core/text/boilerplate.py): off unless the maximum is set
    boilerplate_max_documents: int | None = Field(default=None, ge=1)
    boilerplate_min_words: int | None = Field(default=3, ge=1)  # None: every line counts
    # quality classifiers (core/stages/shard_quality.py): scored after language ID, in order
    classifiers: tuple[ClassifierFilter, ...] | None = None  # None: none

    @field_validator("classifiers")
    @classmethod
    def _unique_classifiers(
        cls, value: tuple[ClassifierFilter, ...] | None
    ) -> tuple[ClassifierFilter, ...] | None:
        _unique("classifier", [c.name for c in value or ()])
        return value

    @field_validator("languages")
    @classmethod
    def _language_codes(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for code in value or ():
            if not re.fullmatch(r"[a-z]{2,3}", code):
                raise ValueError(f"language {shown(code)} is not a code like 'en' or 'fr'")
        return value

    @model_validator(mode="before")
    @classmethod
    def _apply_preset(cls, data: Any) -> Any:
        """A preset's thresholds fill the keys not written; the written ones win."""
        if not isinstance(data, dict) or data.get("preset") is None:
            return data
        names = data["preset"]
        names = [names] if isinstance(names, str) else names
        allowed = ", ".join(FILTER_PRESETS)
        if not isinstance(names, list | tuple) or not names:
            raise ValueError(f"preset is a name or a list of names; allowed: {allowed}")
        filled: dict[str, Any] = {}
        for name in names:
            if name not in FILTER_PRESETS:
                raise ValueError(f"unknown preset {shown(name)} in [filters]; allowed: {allowed}")
            filled.update(FILTER_PRESETS[name])
        return {**filled, **data}


class DedupSpec(_Section):
    """Exact dedup on normalized text, then MinHash-LSH near dedup over word n-grams."""

    exact: bool = True
    near: bool = True
    ngram: int = Field(default=5, ge=1, le=32)
    num_perm: int = Field(default=120, ge=8, le=1024)
    bands: int = Field(default=20, ge=1)
    threshold: float = Field(default=0.8, gt=0.0, le=1.0)
    confirm: bool = True
    partial: bool = True
    seed: int = 1

    @field_validator("bands")
    @classmethod
    def _bands_divide_num_perm(cls, value: int, info: Any) -> int:
        num_perm = info.data.get("num_perm")
        if isinstance(num_perm, int) and num_perm % value:
            allowed = ", ".join(str(b) for b in range(1, num_perm + 1) if num_perm % b == 0)
            raise ValueError(
                f"bands = {value} must divide num_perm = {num_perm}; allowed: {allowed}"
            )
        return value


class PiiSpec(_Section):
    """PII scrubbing: which kinds are replaced by typed placeholders."""

    enabled: bool = True
    email: bool = True
    ip: bool = True
    phone: bool = True


class LicenseSpec(_Section):
    """The license allow-list (lowercase SPDX-style ids)."""

    allow: tuple[str, ...] = DEFAULT_LICENSES

    @field_validator("allow")
    @classmethod
    def _lower(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(v.strip().lower() for v in value)


class ShardSpec(_Section):
    """Target size of one Parquet shard (uncompressed text bytes)."""

    target_mb: float = Field(default=64.0, gt=0.0)


class TokenizerSpec(_Section):
    """`bytes`, or a Hugging Face `tokenizers` tokenizer by file path or hub name.

    `path` is a `tokenizer.json` (relative to the config file); without it `id` is a hub name.
    EOS is `eos_id`, else the id of `eos_token`, else the tokenizer's own end-of-text token
    (`bytes`: 256). `batch_size` is documents per encode call (memory, not output).
    """

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")
    path: str | None = Field(default=None, min_length=1)
    eos_id: int | None = Field(default=None, ge=0, lt=2**32)
    eos_token: str | None = Field(default=None, min_length=1)
    batch_size: int = Field(default=1000, ge=1, le=1_000_000)

    @model_validator(mode="after")
    def _consistent(self) -> TokenizerSpec:
        if self.eos_id is not None and self.eos_token is not None:
            raise ValueError("set eos_id or eos_token, not both")
        if self.id == "bytes":
            if self.path is not None or self.eos_token is not None:
                raise ValueError("the bytes tokenizer takes no path or eos_token")
            if self.eos_id not in (None, 256):  # bytes 0-255, then EOS
                raise ValueError("the bytes tokenizer's eos_id is 256")
        return self


DECONTAMINATE_MODES = ("drop", "cut")
SHA256_PIN = r"^[0-9a-f]{64}$"


def _unique(kind: str, names: list[str]) -> None:
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"{kind} names must be unique; repeated: {', '.join(dupes)}")


class EvalSetSpec(_Section):
    """One `[[decontaminate.sets]]` table: an eval set whose items must not be in the corpus.

    `path` is a local JSONL or Parquet file (relative to the config file), or `hf` a hub dataset
    id with `split` (and `subset`). `fields` are the item fields whose text is indexed; `id_field`
    names the item in the audit (else its row number). `sha256` pins the local file.
    """

    name: str = Field(pattern=NAME_PATTERN)
    path: str | None = Field(default=None, min_length=1)
    hf: str | None = Field(default=None, min_length=1)
    split: str = "test"
    subset: str | None = None
    fields: tuple[str, ...] = Field(min_length=1)
    id_field: str | None = None
    sha256: str | None = Field(default=None, pattern=SHA256_PIN)

    @model_validator(mode="after")
    def _one_input(self) -> EvalSetSpec:
        if (self.path is None) == (self.hf is None):
            raise ValueError("set exactly one of path (a local JSONL/Parquet file) or hf")
        if self.hf is not None and self.sha256 is not None:
            raise ValueError("sha256 pins a local path; an hf set has none")
        return self


class DecontaminateSpec(_Section):
    """Drop (or cut) documents that share a word n-gram with an eval set's items."""

    ngram: int = Field(default=13, ge=1, le=64)
    mode: str = "drop"
    window: int = Field(default=200, ge=0)
    min_chars: int = Field(default=200, ge=0)
    max_pieces: int = Field(default=10, ge=1)
    sets: tuple[EvalSetSpec, ...] = Field(min_length=1)

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, value: str) -> str:
        if value not in DECONTAMINATE_MODES:
            raise ValueError(
                f"unknown mode {shown(value)}; allowed: {', '.join(DECONTAMINATE_MODES)}"
            )
        return value

    @field_validator("sets")
    @classmethod
    def _unique_sets(cls, value: tuple[EvalSetSpec, ...]) -> tuple[EvalSetSpec, ...]:
        _unique("eval set", [s.name for s in value])
        return value


class IdListSpec(_Section):
    """One `[[exclude.ids]]` table: a file of document ids (one per line, or JSONL `id_field`)."""

    name: str = Field(pattern=NAME_PATTERN)
    path: str = Field(min_length=1)
    id_field: str = "id"
    sha256: str | None = Field(default=None, pattern=SHA256_PIN)


class EarlierBuildSpec(_Section):
    """One `[[exclude.builds]]` table: a shards `_MANIFEST.json` path or a corpus partition key."""

    name: str = Field(pattern=NAME_PATTERN)
    manifest: str | None = Field(default=None, min_length=1)
    partition: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_build(self) -> EarlierBuildSpec:
        if (self.manifest is None) == (self.partition is None):
            raise ValueError("set exactly one of manifest (a shards _MANIFEST.json) or partition")
        return self


class ExcludeSpec(_Section):
    """Documents already used elsewhere: by id, or by id or exact-dedup key of an earlier build."""

    ids: tuple[IdListSpec, ...] = ()
    builds: tuple[EarlierBuildSpec, ...] = ()

    @model_validator(mode="after")
    def _named_once(self) -> ExcludeSpec:
        if not self.ids and not self.builds:
            raise ValueError("name at least one [[exclude.ids]] or [[exclude.builds]] table")
        _unique("exclude list", [s.name for s in self.ids] + [b.name for b in self.builds])
        return self


class CorpusConfig(_Section):
    """A whole corpus config as validated; identity comes from the raw form, not this one."""

    dataset: str = Field(pattern=NAME_PATTERN)
    version: str = Field(pattern=NAME_PATTERN)
    tokenizer: TokenizerSpec
    sources: tuple[SourceSpec, ...] = ()
    filters: FilterSpec = FilterSpec()
    dedup: DedupSpec = DedupSpec()
    pii: PiiSpec = PiiSpec()
    licenses: LicenseSpec = LicenseSpec()
    shards: ShardSpec = ShardSpec()
    decontaminate: DecontaminateSpec | None = None
    exclude: ExcludeSpec | None = None

    @field_validator("sources")
    @classmethod
    def _unique_names(cls, value: tuple[SourceSpec, ...]) -> tuple[SourceSpec, ...]:
        names = [s.name for s in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"source names must be unique; repeated: {', '.join(dupes)}")
        return value


def canon(raw: dict[str, Any]) -> bytes:
    """The canonical form: sorted keys at every level, `,`/`:` separators, UTF-8, no escaping."""
    return json.dumps(
        raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ConfigIdentity:
    """A config's identity from its raw form (as written, defaults not filled in) and the folder
    its relative paths resolve against; for the frozen dataclasses of the loaded configs."""

    raw: dict[str, Any]
    base_dir: Path

    @cached_property
    def canonical(self) -> bytes:
        return canon(self.raw)

    @property
    def masked(self) -> bytes:
        """The canonical form with URL secrets masked: what records and messages show."""
        return canon(mask_data(self.raw))

    @cached_property
    def sha256(self) -> str:
        return sha256_hex(self.canonical)

    @property
    def hash12(self) -> str:
        return self.sha256[:12]

    def resolve(self, path: str) -> Path:
        """A path from the config, relative paths taken against the config file's folder."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else self.base_dir / p


@dataclass(frozen=True)
class LoadedConfig(ConfigIdentity):
    """A validated config with its raw form (the identity) and the folder paths resolve against."""

    raw: dict[str, Any]
    model: CorpusConfig
    base_dir: Path

    @property
    def build_id(self) -> str:
        return f"corpus/{self.model.dataset}/{self.model.version}/{self.hash12}"

    @property
    def partition_key(self) -> str:
        return f"{self.model.dataset}-{self.model.version}-{self.hash12}"

    def stage_key(self, stage: str) -> str:
        if stage not in STAGES:
            raise ConfigError(f"unknown stage {stage!r}; allowed: {', '.join(STAGES)}")
        return f"{self.build_id}/{stage}"

    def source_key(self, source: SourceSpec) -> str:
        """`<name>-<sha256(canon(spec as written))[:12]>`: shared by configs with the same spec."""
        for raw_source in self.raw.get("sources", []):
            if raw_source.get("name") == source.name:
                return f"{source.name}-{sha256_hex(canon(raw_source))[:12]}"
        raise ConfigError(f"source {source.name!r} is not in the config")


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ConfigError(f"duplicate key {key!r} in JSON config")
        out[key] = value
    return out


def _no_constant(name: str) -> float:
    raise ConfigError(f"{name} is not allowed in a config; use a finite number")


def parse_text(text: str, fmt: str) -> dict[str, Any]:
    """Decode config text as `toml` or `json` into a plain dict (the form that is hashed)."""
    try:
        if fmt == "toml":
            data: Any = tomllib.loads(text)
        else:
            data = json.loads(
                text, object_pairs_hook=_reject_duplicate_keys, parse_constant=_no_constant
            )
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"config is not valid {fmt.upper()}: {exc}") from exc
    except RecursionError:
        raise ConfigError(f"config {fmt.upper()} is nested too deeply") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config must be a {fmt.upper()} table/object, got {type(data).__name__}")
    try:
        _check_plain(data, "")
    except RecursionError:
        raise ConfigError(f"config {fmt.upper()} is nested too deeply") from None
    return data


def _check_plain(value: Any, where: str) -> None:
    """Only JSON-representable values: TOML dates and non-finite floats have no canonical form."""
    if isinstance(value, dict):
        for k, v in value.items():
            _check_utf8(k, f"{where}: key {k!r}" if where else f"key {k!r}")
            _check_plain(v, f"{where}.{k}" if where else k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_plain(v, f"{where}[{i}]")
    elif isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}: non-finite number {value!r} is not allowed")
    elif isinstance(value, str):
        _check_utf8(value, where)
    elif not isinstance(value, int | float | bool) and value is not None:
        raise ConfigError(f"{where}: {type(value).__name__} values are not allowed; use a string")


def _check_utf8(text: str, where: str) -> None:
    """JSON `\\ud800` escapes decode to lone surrogates, which have no UTF-8 (canonical) form."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigError(
            f"{where}: lone surrogate {text[exc.start]!r} has no UTF-8 form; fix the \\u escape"
        ) from None


def _location(loc: tuple[Any, ...], raw: dict[str, Any]) -> str:
    """`[filters]`, `sources[1]` or `top level` for a pydantic error location."""
    parts: list[str] = []
    node: Any = raw
    for item in loc:
        if isinstance(item, int):
            entry = node[item] if isinstance(node, list) and 0 <= item < len(node) else None
            name = entry.get("name") if isinstance(entry, dict) else None
            label = f"{parts.pop() if parts else ''}[{item}]"
            parts.append(f"{label} ({name})" if isinstance(name, str) else label)
        else:
            parts.append(str(item))
        node = node[item] if isinstance(node, dict | list) and _has(node, item) else None
    return ".".join(parts)


def _has(node: Any, item: Any) -> bool:
    if isinstance(node, dict):
        return item in node
    return isinstance(item, int) and 0 <= item < len(node)


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel]:
    model: type[BaseModel] = CorpusConfig
    for item in loc:
        if isinstance(item, int):
            continue
        field = model.model_fields.get(str(item))
        annotation = getattr(field, "annotation", None)
        nested = _nested_model(annotation)
        if nested is None:
            break
        model = nested
    return model


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _nested_model(arg)
        if found is not None:
            return found
    return None


def _explain(exc: ValidationError, raw: dict[str, Any]) -> str:
    messages = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        if err["type"] == "extra_forbidden":
            parent, key = loc[:-1], loc[-1]
            where = f"[{_location(parent, raw)}]" if parent else "the top level"
            allowed = ", ".join(_model_at(parent).model_fields)
            messages.append(f"unknown key {key!r} in {where}; allowed: {allowed}")
        elif err["type"] == "missing":
            messages.append(f"missing required key {_location(loc, raw)!r}")
        elif err["type"] == "string_pattern_mismatch" and loc[-1] in ("dataset", "version", "name"):
            messages.append(
                f"{_location(loc, raw)} is not a path-safe name: {name_problem(err['input'])}; "
                + NAME_RULE
            )
        else:
            msg = err["msg"].removeprefix("Value error, ")
            messages.append(f"{_location(loc, raw) or 'config'}: {msg}")
    return "; ".join(messages)


def name_problem(value: str) -> str:
    """What makes `value` not a path-safe name, without quoting it (it may be a secret pasted
    into the wrong key, and the message goes to logs)."""
    if not value:
        return "it is empty"
    if len(value) > 64:
        return f"it has {len(value)} characters"
    if any(ch.isupper() for ch in value):
        return "it has uppercase letters"
    odd = sorted({ch for ch in value if not re.fullmatch(r"[a-z0-9._-]", ch)})
    if odd:
        return "it has " + ", ".join(repr(ch) for ch in odd[:3])
    return "it starts with " + repr(value[0])


def validate(raw: dict[str, Any], base_dir: Path) -> LoadedConfig:
    """Validate a decoded config; every problem is one clause of one ConfigError."""
    try:
        model = CorpusConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"invalid config: {_explain(exc, raw)}") from None
    raw = _pin_classifier_models(_pin_language_model(raw, model), model, base_dir)
    return LoadedConfig(raw=raw, model=model, base_dir=base_dir)


LANGUAGE_MODEL = "lid.176.ftz"
"""fastText's language-ID model, bundled in the package (corpus_assets/models/NOTICE.md)."""
MODELS = Path(__file__).resolve().parent.parent / "models"


def language_model_file() -> Path:
    """The path of LANGUAGE_MODEL in the installed package."""
    path = MODELS / LANGUAGE_MODEL
    if not path.is_file():
        raise ConfigError(
            f"[filters] languages needs fastText's {LANGUAGE_MODEL}, which the package ships "
            f"in {MODELS}; it is missing: reinstall corpus_assets"
        )
    return path


@cache
def language_model_sha256() -> str:
    """The sha256 of the installed LANGUAGE_MODEL file."""
    return sha256_hex(language_model_file().read_bytes())


def _pin_language_model(raw: dict[str, Any], model: CorpusConfig) -> dict[str, Any]:
    """With `languages` set, the model file's sha256 is part of the config as written (filled in
    as `language_model_sha256` when not written; a written one must be the installed model's)."""
    if model.filters.languages is None:
        return raw
    installed, pinned = language_model_sha256(), model.filters.language_model_sha256
    if pinned is None:
        return {**raw, "filters": {**raw["filters"], "language_model_sha256": installed}}
    if pinned != installed:
        raise ConfigError(
            f"[filters] language_model_sha256 = {pinned!r}, but the installed {LANGUAGE_MODEL} "
            f"({language_model_file()}) has sha256 {installed!r}: this config was made with "
            "another model; install that one or remove the pin (a new build)"
        )
    return raw


def classifier_model_file(spec: ClassifierFilter, base_dir: Path) -> Path:
    """The local model file of a classifier whose `model` is a path (relative to `base_dir`)."""
    path = Path(spec.model).expanduser()
    return path if path.is_absolute() else base_dir / path


@cache
def _file_sha256(path: Path, size: int, mtime_ns: int) -> str:
    """The sha256 of a model file, read once per process and version of the file."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def model_file_sha256(path: Path, name: str) -> str:
    """The sha256 of classifier `name`'s model file; a ConfigError when there is none."""
    try:
        st = path.stat()
        if not path.is_file():
            raise IsADirectoryError(path)
        return _file_sha256(path, st.st_size, st.st_mtime_ns)
    except OSError:
        raise ConfigError(
            f"[[filters.classifiers]] {name!r}: model file not found: {path}"
        ) from None


def _pin_classifier_models(
    raw: dict[str, Any], model: CorpusConfig, base_dir: Path
) -> dict[str, Any]:
    """A classifier read from a local file has that file's sha256 in the config as written
    (filled in as `model_sha256` when not written; a written one must be the file's)."""
    specs = model.filters.classifiers or ()
    if not any(model_kind(c.model) == "path" for c in specs):
        return raw
    tables = [dict(t) for t in raw["filters"]["classifiers"]]
    for spec, table in zip(specs, tables, strict=True):
        if model_kind(spec.model) != "path":
            continue
        path = classifier_model_file(spec, base_dir)
        actual = model_file_sha256(path, spec.name)
        if spec.model_sha256 is None:
            table["model_sha256"] = actual
        elif spec.model_sha256 != actual:
            raise ConfigError(
                f"[[filters.classifiers]] {spec.name!r}: model_sha256 = {spec.model_sha256!r}, "
                f"but {path} has sha256 {actual!r}: the model changed since the config was "
                "written; restore it or remove the pin (a new build)"
            )
    return {**raw, "filters": {**raw["filters"], "classifiers": tables}}


def load_config(path: str | Path) -> LoadedConfig:
    """Read and validate a `.toml` or `.json` config file."""
    p = Path(path)
    if p.suffix not in (".toml", ".json"):
        raise ConfigError(f"config file {str(p)!r} must end in .toml or .json")
    raw = parse_text(read_config_text(p, "config file"), p.suffix[1:])
    if p.suffix == ".json" and has_masks(raw) and _origin_of(p).is_file():
        return _registered_with_secrets(p, raw)
    return validate(raw, config_base_dir(p))


def _origin_of(p: Path) -> Path:
    return p.with_name(f"{p.stem}{ORIGIN_SUFFIX}")


def _registered_with_secrets(p: Path, masked: dict[str, Any]) -> LoadedConfig:
    """A registered copy whose URL secrets are masked: the original file it was registered
    from (named in its origin record), checked to be the same config, secrets included."""
    try:
        file = Path(json.loads(_origin_of(p).read_text(encoding="utf-8"))["file"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"unreadable {_origin_of(p)}: {exc}") from None
    again = "; the registry keeps no secrets: register the config again from a file with them"
    try:
        cfg = load_config(file)
    except ConfigError as exc:
        raise ConfigError(
            f"registered config {p.stem} has masked URL secrets: {exc}{again}"
        ) from None
    if cfg.hash12 != p.stem or cfg.masked != canon(masked):
        raise ConfigError(
            f"{file} changed since it was registered as {p.stem} (its hash is now {cfg.hash12})"
            + again
        )
    return cfg


def read_config_text(path: Path, noun: str) -> str:
    """The UTF-8 text of a config file; a ConfigError that names `noun` and the path if not."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{noun} not found: {path}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{noun} {path} is not UTF-8: {exc.reason} at byte {exc.start}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {noun} {path}: {exc.strerror}") from None


ORIGIN_SUFFIX = ".origin.json"


def config_base_dir(p: Path) -> Path:
    """The config's own folder, or the original one recorded beside a registered copy."""
    origin = p.with_name(f"{p.stem}{ORIGIN_SUFFIX}")
    if p.suffix == ".json" and origin.is_file():
        try:
            return Path(json.loads(origin.read_text(encoding="utf-8"))["base_dir"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"unreadable {origin}: {exc}") from None
    return p.resolve().parent
