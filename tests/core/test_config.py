"""The corpus config: validation messages and the content identity (docs/configs.md)."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from support.values import shuffled

from corpus_assets.core.config import (
    DEFAULT_LICENSES,
    SOURCE_KINDS,
    STAGES,
    CorpusConfig,
    FilterSpec,
    SourceSpec,
    canon,
    load_config,
    parse_text,
    validate,
)
from corpus_assets.core.errors import ConfigError

HAND = {"version": "v1", "dataset": "tinystories", "tokenizer": {"id": "bytes"}}
HAND_CANON = b'{"dataset":"tinystories","tokenizer":{"id":"bytes"},"version":"v1"}'
HAND_SHA = "a03711ec959b2a8fb6cf51d9445bee90fcb69a103cfa033483b52f836269c0a6"

WriteConfig = Callable[[Path, Mapping[str, Any]], Path]
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _error(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        validate(raw, Path("."))
    return str(info.value)


def _with(**changes: Any) -> dict[str, Any]:
    return {**json.loads(json.dumps(HAND)), **changes}


def _source(**changes: Any) -> dict[str, Any]:
    return {"name": "s", "kind": "jsonl", "path": "x.jsonl", "license": "mit", **changes}


# --- golden: the hand example ------------------------------------------------------------------


def test_hand_example_identity() -> None:
    cfg = validate(json.loads(json.dumps(HAND)), Path("."))
    assert cfg.canonical == HAND_CANON
    assert len(cfg.canonical) == 67
    assert cfg.sha256 == HAND_SHA
    assert cfg.hash12 == "a03711ec959b"
    assert cfg.build_id == "corpus/tinystories/v1/a03711ec959b"
    assert cfg.partition_key == "tinystories-v1-a03711ec959b"
    assert STAGES == ("fetch", "shard", "tokenize", "cleanup")
    assert [cfg.stage_key(s) for s in STAGES] == [
        f"corpus/tinystories/v1/a03711ec959b/{s}" for s in ("fetch", "shard", "tokenize", "cleanup")
    ]
    assert "/" not in cfg.partition_key and "," not in cfg.partition_key


def test_hand_example_from_files(tmp_path: Path, write_config: WriteConfig) -> None:
    for name in ("hand.json", "hand.toml"):
        cfg = load_config(write_config(tmp_path / name, HAND))
        assert cfg.canonical == HAND_CANON
        assert cfg.sha256 == HAND_SHA


def test_unknown_stage_key_is_a_config_error() -> None:
    cfg = validate(_with(), Path("."))
    with pytest.raises(ConfigError, match="unknown stage 'dedup'; allowed: fetch, shard"):
        cfg.stage_key("dedup")


def test_canonical_form_is_the_config_as_written_not_with_defaults() -> None:
    bare = validate(_with(), Path("."))
    explicit = validate(_with(filters={"min_chars": FilterSpec().min_chars}), Path("."))
    assert bare.model == validate(_with(filters={}), Path(".")).model
    assert explicit.model.filters == bare.model.filters
    assert explicit.sha256 != bare.sha256  # what the user wrote is the identity
    assert b"min_chars" not in bare.canonical


def test_canonical_form_keeps_unicode_unescaped() -> None:
    cfg = validate(_with(sources=[_source(path="données/ü.jsonl")]), Path("."))
    assert "données/ü.jsonl".encode() in cfg.canonical
    assert b"\\u" not in cfg.canonical


def test_source_key_is_name_and_hash_of_the_spec_as_written() -> None:
    spec = _source(limit=10)
    cfg = validate(_with(sources=[spec, _source(name="t")]), Path("."))
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True, separators=(",", ":")).encode())
    assert cfg.source_key(cfg.model.sources[0]) == f"s-{digest.hexdigest()[:12]}"
    # the same spec in another config (other dataset, other sources) has the same key
    other = validate(
        {"dataset": "other", "version": "v9", "tokenizer": {"id": "gpt2"}, "sources": [spec]},
        Path("."),
    )
    assert other.source_key(other.model.sources[0]) == cfg.source_key(cfg.model.sources[0])
    assert other.sha256 != cfg.sha256


# --- validation messages ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "key", "where", "allowed"),
    [
        (_with(datset="x"), "datset", "the top level", CorpusConfig.model_fields),
        (_with(filters={"min_char": 5}), "min_char", "[filters]", FilterSpec.model_fields),
        (
            _with(sources=[_source(licence="mit")]),
            "licence",
            "[sources[0] (s)]",
            SourceSpec.model_fields,
        ),
        (_with(tokenizer={"id": "bytes", "eos": 1}), "eos", "[tokenizer]", ("id", "path")),
        (_with(dedup={"dedupe": True}), "dedupe", "[dedup]", ("exact", "near", "threshold")),
    ],
)
def test_unknown_key_names_the_key_and_the_allowed_ones(
    raw: dict[str, Any], key: str, where: str, allowed: Any
) -> None:
    message = _error(raw)
    assert f"unknown key {key!r} in {where}" in message
    listed = message.split("allowed:", 1)[1]
    for name in allowed:
        assert name in listed


def test_unknown_key_in_a_later_source_names_that_source() -> None:
    message = _error(_with(sources=[_source(name="a"), _source(name="b", separater="x")]))
    assert "unknown key 'separater' in [sources[1] (b)]" in message


@pytest.mark.parametrize("field", ["dataset", "version"])
@pytest.mark.parametrize(
    "bad", ["../x", "..", "A", "a/b", "", "a" * 65, "a b", ".hidden", "-x", "a\n", "ü"]
)
def test_dataset_and_version_must_be_path_safe(field: str, bad: str) -> None:
    message = _error(_with(**{field: bad}))
    assert f"{field} is not a path-safe name: it " in message
    assert "lowercase letters, digits" in message
    if len(bad) > 1:  # the value itself is never quoted (at most one character of it)
        assert repr(bad) not in message


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("version", "Hunter2-SECRET", "version is not a path-safe name: it has uppercase letters"),
        ("dataset", "../x", "dataset is not a path-safe name: it has '/'"),
        ("dataset", "", "dataset is not a path-safe name: it is empty"),
        ("version", "a" * 65, "version is not a path-safe name: it has 65 characters"),
        ("version", ".hidden", "version is not a path-safe name: it starts with '.'"),
        ("version", "pass word!", "version is not a path-safe name: it has ' ', '!'"),
    ],
)
def test_a_bad_name_is_described_not_quoted(field: str, value: str, says: str) -> None:
    message = _error(_with(**{field: value}))
    assert says in message
    if value:
        assert value not in message


def test_an_unknown_kind_is_quoted_only_when_it_is_a_short_word() -> None:
    assert "unknown source kind 'csv'; allowed:" in _error(_with(sources=[_source(kind="csv")]))
    message = _error(_with(sources=[_source(kind="sk-Live-9f8e7d6c5b4a")]))
    assert "unknown source kind <20 characters, not shown>; allowed:" in message
    assert "9f8e7d" not in message


@pytest.mark.parametrize("good", ["a", "0", "a" * 64, "v1.2_rc-3", "a..b"])
def test_path_safe_names_are_accepted(good: str) -> None:
    cfg = validate(_with(dataset=good, version=good), Path("."))
    assert cfg.build_id.startswith(f"corpus/{good}/{good}/")


@pytest.mark.parametrize("missing", ["dataset", "version", "tokenizer"])
def test_required_keys(missing: str) -> None:
    raw = _with()
    del raw[missing]
    assert f"missing required key {missing!r}" in _error(raw)


def test_tokenizer_id_is_required() -> None:
    assert "missing required key 'tokenizer.id'" in _error(_with(tokenizer={}))


def test_source_license_is_required() -> None:
    source = _source()
    del source["license"]
    assert "missing required key 'sources[0] (s).license'" in _error(_with(sources=[source]))


def test_unknown_source_kind_lists_the_allowed_kinds() -> None:
    message = _error(_with(sources=[_source(kind="csv")]))
    assert "unknown source kind 'csv'" in message
    assert f"allowed: {', '.join(SOURCE_KINDS)}" in message


def test_source_names_must_be_unique() -> None:
    message = _error(_with(sources=[_source(), _source(path="y.jsonl")]))
    assert "source names must be unique; repeated: s" in message


def test_every_problem_is_reported_at_once() -> None:
    message = _error({"dataset": "A", "tokenizer": {"id": "bytes"}, "filters": {"x": 1}})
    assert "dataset is not a path-safe name" in message
    assert "missing required key 'version'" in message
    assert "unknown key 'x' in [filters]" in message


@pytest.mark.parametrize("entry", ["a", ["a"], 3, None])
def test_a_source_that_is_not_a_table_is_a_config_error(entry: Any) -> None:
    # regression: the error explainer crashed (AttributeError) on a non-table list item
    message = _error(_with(sources=[_source(), entry]))
    assert "sources[1]" in message


def test_licenses_are_lowercased_and_default_to_an_allow_list() -> None:
    cfg = validate(_with(sources=[_source(license=" MIT ")]), Path("."))
    assert cfg.model.sources[0].license == "mit"
    assert cfg.model.licenses.allow == DEFAULT_LICENSES


# --- parsing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fmt", "expected"),
    [
        ('{"dataset": "a", "dataset": "b"}', "json", "duplicate key 'dataset'"),
        ('{"dataset": NaN}', "json", "NaN is not allowed"),
        ('{"dataset": Infinity}', "json", "Infinity is not allowed"),
        ("[1, 2]", "json", "must be a JSON table/object, got list"),
        ('{"dataset": "a",}', "json", "not valid JSON"),
        ("dataset = ", "toml", "not valid TOML"),
        ("x = nan", "toml", "x: non-finite number nan"),
        ("when = 2024-01-01", "toml", "when: date values are not allowed"),
        ('{"tokenizer": {"eos_token": "\\ud800"}}', "json", "tokenizer.eos_token: lone surrogate"),
        ('{"\\udfff": 1}', "json", "lone surrogate"),
        ('{"a": ' + "[" * 5000 + "]" * 5000 + "}", "json", "nested too deeply"),
    ],
)
def test_parse_errors_are_config_errors(text: str, fmt: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_text(text, fmt)
    assert expected in str(info.value)


def test_config_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "absent.toml")
    (tmp_path / "c.yaml").write_text("dataset: a\n")
    with pytest.raises(ConfigError, match=r"must end in \.toml or \.json"):
        load_config(tmp_path / "c.yaml")
    (tmp_path / "latin1.json").write_bytes(b'{"dataset": "caf\xe9"}')
    with pytest.raises(ConfigError, match="is not UTF-8"):
        load_config(tmp_path / "latin1.json")


def test_relative_paths_resolve_against_the_config_folder(
    tmp_path: Path, write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config(tmp_path / "cfgs" / "c.toml", _with(sources=[_source()]))
    monkeypatch.chdir(tmp_path)
    cfg = load_config(Path("cfgs/c.toml"))
    assert cfg.resolve("data/x.jsonl") == tmp_path / "cfgs" / "data" / "x.jsonl"
    assert cfg.resolve("/abs/x.jsonl") == Path("/abs/x.jsonl")
    assert path.exists()


# --- properties: content, not spelling -----------------------------------------------------------

NAMES = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,15}", fullmatch=True)
INTS = st.integers(min_value=-(2**63), max_value=2**63 - 1)
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
TEXT = st.text(max_size=12)


def _configs(nulls: bool) -> st.SearchStrategy[dict[str, Any]]:
    """Valid corpus configs with sources and filters; `nulls` allows JSON null (not in TOML)."""
    maybe: Callable[[st.SearchStrategy[Any]], st.SearchStrategy[Any]] = (
        (lambda s: st.none() | s) if nulls else (lambda s: s)
    )
    source = st.fixed_dictionaries(
        {
            "name": NAMES,
            "kind": st.sampled_from(SOURCE_KINDS),
            "path": st.text(min_size=1, max_size=20),
            "license": st.sampled_from(DEFAULT_LICENSES),
        },
        optional={
            "text_field": TEXT,
            "id_field": maybe(TEXT),
            "separator": maybe(st.text(min_size=1, max_size=5)),
            "limit": maybe(st.integers(min_value=1, max_value=2**40)),
            "sha256": st.from_regex(r"[0-9a-f]{64}", fullmatch=True),
        },
    )
    filters = st.fixed_dictionaries(
        {},
        optional={
            "enabled": st.booleans(),
            "min_chars": maybe(st.integers(min_value=0, max_value=10**6)),
            "max_words": maybe(INTS),
            "min_mean_word_length": maybe(FLOATS),
            "max_symbol_word_ratio": maybe(FLOATS | st.integers(0, 5)),
        },
    )
    return st.fixed_dictionaries(
        {"dataset": NAMES, "version": NAMES, "tokenizer": st.just({"id": "bytes"})},
        optional={
            "sources": st.lists(source, max_size=3, unique_by=lambda s: s["name"]),
            "filters": filters,
            "dedup": st.fixed_dictionaries(
                {}, optional={"threshold": st.floats(0.01, 1.0), "near": st.booleans()}
            ),
            "licenses": st.fixed_dictionaries(
                {}, optional={"allow": st.lists(st.sampled_from(DEFAULT_LICENSES), max_size=4)}
            ),
        },
    )


_WS = [" ", "  ", "\n", "\t", "\r\n", "\n    "]


def _ws(rnd: random.Random) -> str:
    return "".join(rnd.choice(_WS) for _ in range(rnd.randrange(3)))


def json_spelling(value: Any, rnd: random.Random) -> str:
    """The same JSON value with shuffled key order, random whitespace and random escaping."""
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        body = f"{_ws(rnd)},{_ws(rnd)}".join(
            f"{json_spelling(k, rnd)}{_ws(rnd)}:{_ws(rnd)}{json_spelling(v, rnd)}" for k, v in items
        )
        return "{" + _ws(rnd) + body + _ws(rnd) + "}"
    if isinstance(value, list):
        body = f"{_ws(rnd)},{_ws(rnd)}".join(json_spelling(v, rnd) for v in value)
        return "[" + _ws(rnd) + body + _ws(rnd) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=rnd.random() < 0.5)
    return json.dumps(value)


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaves(v, (*path, k))]
    if isinstance(value, list) and value:
        return [p for i, v in enumerate(value) for p in _leaves(v, (*path, i))]
    return [path]


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {k: _replace(v, rest, new) if k == head else v for k, v in value.items()}
    return [_replace(v, rest, new) if i == head else v for i, v in enumerate(value)]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | INTS | FLOATS | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=20,
)


@PROPERTY
@given(value=st.dictionaries(st.text(max_size=6), JSON_VALUES), seed=st.integers(0, 2**32))
def test_spelling_never_changes_the_canonical_form(value: dict[str, Any], seed: int) -> None:
    text = json_spelling(value, random.Random(seed))
    assert canon(parse_text(text, "json")) == canon(value)


@PROPERTY
@given(config=_configs(nulls=True), seed=st.integers(0, 2**32), data=st.data())
def test_key_order_and_whitespace_never_change_the_hash(
    tmp_path_factory: pytest.TempPathFactory,
    config: dict[str, Any],
    seed: int,
    data: st.DataObject,
) -> None:
    folder = tmp_path_factory.mktemp("spelling")
    plain = folder / "plain.json"
    plain.write_text(json.dumps(config), encoding="utf-8")
    spelled = folder / "spelled.json"
    spelled.write_text(json_spelling(config, random.Random(seed)), encoding="utf-8")
    indent = data.draw(st.sampled_from([None, 0, 1, 4, "\t"]))
    pretty = folder / "pretty.json"
    pretty.write_text(
        json.dumps(shuffled(config, random.Random(seed)), indent=indent, ensure_ascii=False)
    )
    a, b, c = (load_config(p) for p in (plain, spelled, pretty))
    assert a.sha256 == b.sha256 == c.sha256
    assert a.partition_key == b.partition_key == c.partition_key
    assert json.loads(a.canonical) == config


@PROPERTY
@given(config=_configs(nulls=True), data=st.data())
def test_a_changed_value_always_changes_the_hash(
    config: dict[str, Any], data: st.DataObject
) -> None:
    before = validate(config, Path("."))
    path = data.draw(st.sampled_from(_leaves(config)))
    old = config
    for part in path:
        old = old[part]
    new = data.draw(st.none() | st.booleans() | INTS | FLOATS | st.text(max_size=8))
    assume(json.dumps(new) != json.dumps(old))  # 1 vs 1.0 vs true are different values here
    changed = _replace(config, path, new)
    assert canon(changed) != canon(config)
    assert hashlib.sha256(canon(changed)).hexdigest() != before.sha256
    try:
        after = validate(changed, Path("."))
    except ConfigError:
        return  # a changed value may be invalid; a valid one must be a different build
    assert after.sha256 != before.sha256
    assert after.partition_key != before.partition_key


@PROPERTY
@given(config=_configs(nulls=False), seed=st.integers(0, 2**32))
def test_a_toml_file_and_its_json_twin_hash_the_same(
    tmp_path_factory: pytest.TempPathFactory,
    to_toml: Callable[[Mapping[str, Any]], str],
    config: dict[str, Any],
    seed: int,
) -> None:
    folder = tmp_path_factory.mktemp("twins")
    (folder / "c.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "c.toml").write_text(to_toml(shuffled(config, random.Random(seed))), "utf-8")
    as_json, as_toml = load_config(folder / "c.json"), load_config(folder / "c.toml")
    assert as_toml.canonical == as_json.canonical
    assert as_toml.sha256 == as_json.sha256
    assert as_toml.model == as_json.model


def test_toml_twin_of_a_realistic_config(tmp_path: Path) -> None:
    toml_text = """
# a comment, blank lines and odd spacing do not matter
version="v1"
dataset   =   "tinystories"

[tokenizer]
id = "bytes"

[filters]
min_chars = 20
max_symbol_word_ratio = 0.25

[[sources]]
name = "tinystories"
kind = "text"
path = "../data/tinystories/TinyStoriesV2-GPT4-train.head10000lines.txt"
separator = "<|endoftext|>"
license = "cdla-sharing-1.0"
limit = 1_000
"""
    twin = {
        "dataset": "tinystories",
        "filters": {"max_symbol_word_ratio": 0.25, "min_chars": 20},
        "sources": [
            {
                "kind": "text",
                "license": "cdla-sharing-1.0",
                "limit": 1000,
                "name": "tinystories",
                "path": "../data/tinystories/TinyStoriesV2-GPT4-train.head10000lines.txt",
                "separator": "<|endoftext|>",
            }
        ],
        "tokenizer": {"id": "bytes"},
        "version": "v1",
    }
    (tmp_path / "c.toml").write_text(toml_text, encoding="utf-8")
    (tmp_path / "c.json").write_text(json.dumps(twin, indent=3), encoding="utf-8")
    a, b = load_config(tmp_path / "c.toml"), load_config(tmp_path / "c.json")
    assert a.canonical == b.canonical == canon(twin)
    assert a.sha256 == b.sha256
