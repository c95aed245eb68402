"""The job identity (properties): the format, key order, whitespace and `execution` never change
the hash; any changed value of an identity field does."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.values import shuffled

from corpus_assets.tasks.config import (
    NOT_IN_IDENTITY,
    ExecutionSpec,
    JobConfig,
    LoadedJobConfig,
    load_job_config,
    validate_job,
)

PROPERTY = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FILES = ("a.jsonl", "b.jsonl", "c.jsonl")

# NEL and the Unicode line/paragraph separators are YAML line breaks: PyYAML's emitter writes them
# bare in some keys and its reader then folds them (an emitter quirk, not the loader's identity).
chars = st.characters(exclude_characters="\x85\u2028\u2029", exclude_categories=["Cs"])
ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)
scalars = (
    st.booleans()
    | ints
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(chars, max_size=8)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(chars, min_size=1, max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
idents = st.from_regex(r"[a-z_][a-z0-9_]{0,7}", fullmatch=True).filter(
    lambda s: s not in ("if", "in", "is", "or", "as", "def", "for", "and", "not", "del", "try")
)
mappings = st.dictionaries(st.text(chars, min_size=1, max_size=6), values, max_size=4)
refs = st.builds(lambda m, f: f"pkg.{m}:{f}", idents, idents)
file_lists = st.lists(st.sampled_from(FILES), unique=True, max_size=3)
executions = st.fixed_dictionaries(
    {},
    optional={
        "max_workers": st.integers(1, 64),
        "batch_size": st.integers(1, 10_000),
        "backend": st.sampled_from(["thread", "process"]),
        "max_retries": st.integers(0, 10),
        "retry_delay": st.floats(0.001, 60.0),
    },
)
IDENTITY_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "recipe": refs,
    "name": st.from_regex(r"[a-z0-9][a-z0-9._-]{0,20}", fullmatch=True),
    "target_count": st.integers(1, 10**9),
    "purpose": st.sampled_from(["harness", "model", "joint"]),
    "seed": st.integers(0, 2**63 - 1),
    "params": mappings,
    "max_batches": st.integers(1, 1000),
    "max_candidates": st.integers(1, 10**9),
    "inputs": file_lists,
    "exclusions": file_lists,
    "calibration": st.fixed_dictionaries(
        {"implementation": refs}, optional={"repeats": st.integers(1, 9), "params": mappings}
    ),
}
REQUIRED = ("recipe", "target_count", "purpose")
configs = st.fixed_dictionaries(
    {k: IDENTITY_FIELDS[k] for k in REQUIRED},
    optional={
        **{k: s for k, s in IDENTITY_FIELDS.items() if k not in REQUIRED},
        "execution": executions,
    },
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A config folder holding every file the generated configs name."""
    base = tmp_path_factory.mktemp("jobs")
    for name in FILES:
        (base / name).write_text('{"task_id": "t"}\n', encoding="utf-8")
    return base


def _write(
    raw: dict[str, Any], path: Path, rng: random.Random, to_toml: Callable[[Any], str]
) -> LoadedJobConfig:
    """`raw` written as YAML, TOML or JSON (by suffix) in a random key order and layout."""
    doc = shuffled(raw, rng)
    if path.suffix == ".json":
        text = json.dumps(doc, indent=rng.choice([None, 0, 1, 4]), ensure_ascii=rng.random() < 0.5)
    elif path.suffix == ".toml":
        text = to_toml(doc).replace("\n", "\n" * rng.randint(1, 3))
    else:
        text = yaml.safe_dump(
            doc,
            sort_keys=False,
            allow_unicode=rng.random() < 0.5,
            default_flow_style=rng.choice([False, None, True]),
            indent=rng.choice([2, 4]),
        )
    path.write_text(text, encoding="utf-8")
    return load_job_config(path)


@PROPERTY
@given(raw=configs, seed=st.integers(0, 2**32))
def test_format_key_order_and_layout_never_change_the_hash(
    folder: Path, to_toml: Callable[[Any], str], raw: dict[str, Any], seed: int
) -> None:
    rng = random.Random(seed)
    expected = validate_job(raw, folder)
    for suffix in (".yaml", ".toml", ".json"):
        loaded = _write(raw, folder / f"twin{suffix}", rng, to_toml)
        assert loaded.raw == raw, suffix
        assert loaded.canonical == expected.canonical, suffix
        assert loaded.sha256 == expected.sha256, suffix


@PROPERTY
@given(raw=configs, first=executions, second=executions)
def test_execution_settings_never_change_the_hash(
    folder: Path, raw: dict[str, Any], first: dict[str, Any], second: dict[str, Any]
) -> None:
    one = validate_job({**raw, "execution": first}, folder)
    two = validate_job({**raw, "execution": second}, folder)
    bare = validate_job({k: v for k, v in raw.items() if k != "execution"}, folder)
    assert one.sha256 == two.sha256 == bare.sha256
    assert one.partition_key == two.partition_key
    assert one.model.execution.model_dump() == {**ExecutionSpec().model_dump(), **first}


@PROPERTY
@given(raw=configs, field=st.sampled_from(sorted(IDENTITY_FIELDS)), data=st.data())
def test_any_changed_identity_value_changes_the_hash(
    folder: Path, raw: dict[str, Any], field: str, data: st.DataObject
) -> None:
    new = data.draw(IDENTITY_FIELDS[field].filter(lambda v: v != raw.get(field)), label=field)
    before = validate_job(raw, folder)
    after = validate_job({**raw, field: new}, folder)
    assert after.sha256 != before.sha256
    assert after.hash12 != before.hash12


def test_the_properties_cover_every_field() -> None:
    assert set(IDENTITY_FIELDS) | set(NOT_IN_IDENTITY) == set(JobConfig.model_fields)
