"""The data-job config: YAML, TOML or JSON, pydantic models, and the content identity.

`DataJobConfig` is the config in Python and what the loader gives; `loaded_config` turns it (or
a file's path) into a `LoadedJobConfig`, the form the executor runs: model, raw form, identity
and resolved file paths.

The identity is the corpus configs' rule (`core.config.canon`): the config as written (defaults
are not filled in), keys sorted at every level, `,`/`:` separators, UTF-8 unescaped, then
sha256. One exception: the `execution` table is left out of the hashed form, because how a job
runs (workers, backend, batch size, retries) never changes the snapshot it publishes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from corpus_assets.core.config import (
    NAME_PATTERN,
    NAME_RULE,
    canon,
    config_base_dir,
    name_problem,
    parse_text,
    read_config_text,
    sha256_hex,
)
from corpus_assets.core.errors import ConfigError, shown
from corpus_assets.tasks.factory import split_ref
from corpus_assets.tasks.types import PURPOSES, Purpose
from corpus_assets.tasks.yaml_config import parse_yaml

SUFFIXES = {".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".json": "json"}
BACKENDS = ("thread", "process")
NOT_IN_IDENTITY = ("execution",)
DEFAULT_MAX_BATCHES = 10
DEFAULT_MAX_CANDIDATES = 1_000_000
MAX_SEED = 2**63 - 1  # fits a SQLite integer (the checkpoints)


def _ref(value: object) -> str:
    split_ref(value)
    return str(value)


def _one_of(value: object, allowed: tuple[str, ...]) -> object:
    if value not in allowed:
        raise ValueError(f"{shown(value)} is not allowed; allowed: {', '.join(allowed)}")
    return value


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class CalibrationSpec(_Section):
    """`[calibration]`: who answers the probes (a calibrator factory), how often, with what."""

    implementation: StrictStr
    repeats: StrictInt = Field(default=1, ge=1)
    params: dict[str, Any] = Field(default_factory=dict)

    _check_implementation = field_validator("implementation")(_ref)


CORPUS_KEY_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}-[a-z0-9][a-z0-9._-]{0,63}-[0-9a-f]{12}$"


class CorpusInputSpec(_Section):
    """An `inputs` entry `{corpus: <partition key>}`: a corpus build's shards, verified."""

    corpus: StrictStr = Field(pattern=CORPUS_KEY_PATTERN)


class ExecutionSpec(_Section):
    """`[execution]`: how the job runs; not part of the identity (the snapshot is the same)."""

    max_workers: StrictInt = Field(default=1, ge=1)
    batch_size: StrictInt = Field(default=256, ge=1)
    shard_size: StrictInt = Field(default=4096, ge=1)
    backend: Literal["thread", "process"] = "thread"
    max_retries: StrictInt = Field(default=0, ge=0)
    retry_delay: StrictFloat = Field(default=1.0, gt=0.0)

    @field_validator("backend", mode="before")
    @classmethod
    def _known_backend(cls, value: object) -> object:
        return _one_of(value, BACKENDS)


class JobConfig(_Section):
    """A whole data-job config as validated; the identity comes from the raw form."""

    recipe: StrictStr
    name: StrictStr | None = Field(default=None, pattern=NAME_PATTERN)
    target_count: StrictInt = Field(ge=1)
    purpose: Purpose
    seed: StrictInt = Field(default=0, ge=0, le=MAX_SEED)
    params: dict[str, Any] = Field(default_factory=dict)
    max_batches: StrictInt = Field(default=DEFAULT_MAX_BATCHES, ge=1)
    max_candidates: StrictInt = Field(default=DEFAULT_MAX_CANDIDATES, ge=1)
    inputs: list[StrictStr | CorpusInputSpec] = Field(default_factory=list)
    exclusions: list[StrictStr] = Field(default_factory=list)
    calibration: CalibrationSpec | None = None
    execution: ExecutionSpec = ExecutionSpec()

    _check_recipe = field_validator("recipe")(_ref)

    @field_validator("purpose", mode="before")
    @classmethod
    def _known_purpose(cls, value: object) -> object:
        return _one_of(value, PURPOSES)

    @field_validator("inputs", mode="before")
    @classmethod
    def _input_entries(cls, value: object) -> object:
        """Each `inputs` entry is a file path or `{corpus: <partition key>}`, named if not."""
        if not isinstance(value, list):
            return value
        for i, entry in enumerate(value):
            if isinstance(entry, str):
                continue
            if not isinstance(entry, dict) or set(entry) != {"corpus"}:
                what = f"a table of {', '.join(map(str, entry))}" if isinstance(entry, dict) else ""
                raise ValueError(
                    f"inputs[{i}] is {what or shown(entry)}: allowed: a file path, "
                    "or {corpus: <partition key>}"
                )
            if not isinstance(entry["corpus"], str) or not re.match(
                CORPUS_KEY_PATTERN, entry["corpus"]
            ):
                raise ValueError(
                    f"inputs[{i}].corpus = {shown(entry['corpus'])} is not a corpus partition key; "
                    "expected <dataset>-<version>-<hash12>"
                )
        return value

    @field_validator("inputs", "exclusions")
    @classmethod
    def _distinct_nonempty(cls, value: list[Any]) -> list[Any]:
        names = [v if isinstance(v, str) else f"corpus {v.corpus}" for v in value]
        if any(not v for v in names):
            raise ValueError("a file path must not be empty")
        repeated = sorted({v for v in names if names.count(v) > 1})
        if repeated:
            what = "file paths" if all(isinstance(v, str) for v in value) else "inputs"
            raise ValueError(f"{what} must be distinct; repeated: {', '.join(repeated)}")
        return value

    @property
    def file_inputs(self) -> list[str]:
        """The `inputs` that are files (as written)."""
        return [i for i in self.inputs if isinstance(i, str)]

    @property
    def corpus_inputs(self) -> list[str]:
        """The corpus partition keys `inputs` names."""
        return [i.corpus for i in self.inputs if isinstance(i, CorpusInputSpec)]


class DataJobConfig(JobConfig):
    """A data job's config: the config file's keys as fields, plus `base_dir`.

    `base_dir` is the folder that relative `inputs` and `exclusions` resolve against: the working
    directory when the config is made, or the config file's folder when a file is loaded. It is
    not a key of the file and not part of the identity. A bad value is one `ConfigError` line.
    """

    base_dir: Annotated[Path, Field(default_factory=Path.cwd, exclude=True, strict=False)]

    @field_validator("base_dir")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        return value.expanduser().absolute()

    @model_validator(mode="wrap")
    @classmethod
    def _one_line(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """Validation errors as one `ConfigError` line naming the keys, as for a file."""
        try:
            return handler(data)
        except ValidationError as exc:
            clauses = "; ".join(_clause(e) for e in exc.errors())
            raise ConfigError(f"invalid job config: {clauses}") from None

    @classmethod
    def from_file(cls, path: str | Path) -> DataJobConfig:
        """The config in a `.yaml`/`.yml`, `.toml` or `.json` file (see `load_job_config`)."""
        return load_job_config(path).model


def default_name(recipe: str) -> str:
    """A path-safe job name from the recipe's module: `pkg.recipes.arithmetic:f` -> `arithmetic`."""
    module = recipe.partition(":")[0].rsplit(".", 1)[-1].lower()
    name = re.sub(r"[^a-z0-9._-]", "-", module).lstrip("._-")[:64]
    return name or "job"


def identity_form(raw: dict[str, Any]) -> dict[str, Any]:
    """The raw config without the tables that do not change the result (`execution`)."""
    return {k: v for k, v in raw.items() if k not in NOT_IN_IDENTITY}


@dataclass(frozen=True)
class LoadedJobConfig:
    """A validated job config: its model, raw form, identity and resolved file paths."""

    model: DataJobConfig
    raw: dict[str, Any]
    canonical: bytes
    path: Path | None
    base_dir: Path
    inputs: tuple[Path, ...]
    exclusions: tuple[Path, ...]

    @property
    def sha256(self) -> str:
        return sha256_hex(self.canonical)

    @property
    def hash12(self) -> str:
        return self.sha256[:12]

    @property
    def name(self) -> str:
        """The `name` as written, else derived from the recipe's module name."""
        return self.model.name or default_name(self.model.recipe)

    @property
    def partition_key(self) -> str:
        return f"{self.name}-{self.hash12}"


_SECTIONS: dict[str, type[BaseModel]] = {
    "": JobConfig,
    "execution": ExecutionSpec,
    "calibration": CalibrationSpec,
    "inputs": CorpusInputSpec,
}


def _clause(err: Any) -> str:
    """One pydantic error as one clause naming the key, the value and what is allowed."""
    loc = tuple(str(p) for p in err["loc"])
    where = ".".join(loc)
    if err["type"] == "extra_forbidden":
        parent = ".".join(loc[:-1])
        section = f"[{parent}]" if parent else "the top level"
        model = _SECTIONS.get(parent, JobConfig)
        return f"unknown key {loc[-1]!r} in {section}; allowed: {', '.join(model.model_fields)}"
    if err["type"] == "missing":
        model = _SECTIONS.get(".".join(loc[:-1]), JobConfig)
        required = [k for k, f in model.model_fields.items() if f.is_required()]
        return f"missing required key {where!r} (required: {', '.join(required)})"
    if err["type"] == "string_pattern_mismatch" and loc == ("name",):
        return f"name is not a path-safe name: {name_problem(err['input'])}; {NAME_RULE}"
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"].endswith("_type") or err["type"] in ("greater_than_equal", "greater_than"):
        msg = f"{msg}, got {shown(err['input'])}"
    return f"{where or 'config'}: {msg}"


def _resolve(paths: list[str], base_dir: Path, field: str) -> tuple[Path, ...]:
    """Absolute paths of `inputs`/`exclusions`, each an existing file, else a ConfigError."""
    out = []
    for i, written in enumerate(paths):
        p = Path(written).expanduser()
        p = (p if p.is_absolute() else base_dir / p).resolve()
        if not p.is_file():
            problem = "is not a file" if p.exists() else "not found"
            raise ConfigError(f"{field}[{i}] = {written!r}: {problem} (resolved to {p})")
        out.append(p)
    return tuple(out)


def validate_job(raw: dict[str, Any], base_dir: Path, path: Path | None = None) -> LoadedJobConfig:
    """Validate a decoded job config; file paths resolve against `base_dir`."""
    if "base_dir" in raw:  # a DataJobConfig field, never a key of the config itself
        allowed = ", ".join(JobConfig.model_fields)
        raise ConfigError(
            f"invalid job config: unknown key 'base_dir' in the top level; allowed: {allowed}"
        )
    model = DataJobConfig.model_validate({**raw, "base_dir": base_dir})
    return LoadedJobConfig(
        model=model,
        raw=raw,
        canonical=canon(identity_form(raw)),
        path=path,
        base_dir=base_dir,
        inputs=_resolve(model.file_inputs, base_dir, "inputs"),
        exclusions=_resolve(model.exclusions, base_dir, "exclusions"),
    )


def parse_job_text(text: str, fmt: str) -> dict[str, Any]:
    """Decode job config text as `yaml`, `toml` or `json` into a plain dict (the hashed form)."""
    if fmt == "yaml":
        return parse_yaml(text)
    if fmt in ("toml", "json"):
        return parse_text(text, fmt)
    raise ConfigError(f"unknown config format {fmt!r}; allowed: yaml, toml, json")


def load_job_config(path: str | Path) -> LoadedJobConfig:
    """Read and validate a `.yaml`/`.yml`, `.toml` or `.json` job config file."""
    p = Path(path)
    fmt = SUFFIXES.get(p.suffix)
    if fmt is None:
        raise ConfigError(f"job config {str(p)!r} must end in {', '.join(SUFFIXES)}")
    text = read_config_text(p, "job config")
    resolved = p.resolve()
    return validate_job(parse_job_text(text, fmt), config_base_dir(resolved), resolved)


def loaded_config(config: DataJobConfig | LoadedJobConfig | str | Path) -> LoadedJobConfig:
    """The loaded form of a `DataJobConfig`, a `LoadedJobConfig` or a config file's path.

    A `DataJobConfig` counts as the file that holds the keys it was given (defaults are not
    filled in), so it has that file's identity, and its recipe gets the JSON form of `params`.
    """
    if isinstance(config, LoadedJobConfig):
        return config
    if not isinstance(config, DataJobConfig):
        return load_job_config(config)
    written = config.model_dump(exclude_unset=True)  # `base_dir` is excluded
    try:
        raw = json.loads(canon(written))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid job config: not JSON ({exc})") from None
    return validate_job(raw, config.base_dir)
