"""The data-job config: the golden identity, file formats, one-line errors, input paths."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from corpus_assets.core.errors import EXIT_USAGE, ConfigError, shown
from corpus_assets.tasks.config import (
    CalibrationSpec,
    ExecutionSpec,
    JobConfig,
    default_name,
    load_job_config,
    parse_job_text,
    validate_job,
)

HAND = {
    "recipe": "corpus_assets.recipes.arithmetic:create_recipe",
    "target_count": 8,
    "purpose": "harness",
    "seed": 7,
    "params": {"candidate_count": 64, "maximum_per_recipe": 4},
    "execution": {"max_workers": 2, "backend": "process"},
}
HAND_YAML = """\
# a hand-written job config
recipe: corpus_assets.recipes.arithmetic:create_recipe
target_count: 8
purpose: harness
seed: 7
params:
  maximum_per_recipe: 4
  candidate_count: 64
execution:
  backend: process
  max_workers: 2
"""
HAND_CANON = (
    b'{"params":{"candidate_count":64,"maximum_per_recipe":4},"purpose":"harness",'
    b'"recipe":"corpus_assets.recipes.arithmetic:create_recipe","seed":7,"target_count":8}'
)
HAND_SHA = "734f160e7e6af1f22990b2511b37280ae2fe264b6d8d7e4338ec9e4ab4e0c667"


def _with(**changes: Any) -> dict[str, Any]:
    return {**json.loads(json.dumps(HAND)), **changes}


def _error(raw: dict[str, Any], base: Path = Path(".")) -> str:
    with pytest.raises(ConfigError) as info:
        validate_job(raw, base)
    assert info.value.exit_code == EXIT_USAGE
    message = str(info.value)
    assert "\n" not in message
    return message


# --- golden: the hand example ------------------------------------------------------------------


def test_hand_example_identity() -> None:
    cfg = validate_job(_with(), Path("."))
    assert cfg.canonical == HAND_CANON
    assert hashlib.sha256(HAND_CANON).hexdigest() == HAND_SHA
    assert cfg.sha256 == HAND_SHA
    assert cfg.hash12 == "734f160e7e6a"
    assert cfg.name == "arithmetic"
    assert cfg.partition_key == "arithmetic-734f160e7e6a"
    assert b"execution" not in cfg.canonical  # how it runs is not what it makes
    assert cfg.model.execution == ExecutionSpec(max_workers=2, backend="process")


def test_hand_example_from_yaml_toml_and_json_files(tmp_path: Path, to_toml: Any) -> None:
    texts = {
        "job.yaml": HAND_YAML,
        "job.yml": HAND_YAML,
        "job.toml": to_toml(HAND),
        "job.json": json.dumps(HAND, indent=2),
    }
    for name, text in texts.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        cfg = load_job_config(tmp_path / name)
        assert cfg.canonical == HAND_CANON, name
        assert cfg.sha256 == HAND_SHA, name
        assert cfg.path == (tmp_path / name).resolve()
        assert cfg.base_dir == tmp_path.resolve()


def test_defaults_are_filled_in_the_model_not_in_the_identity() -> None:
    cfg = validate_job({"recipe": "m:f", "target_count": 1, "purpose": "model"}, Path("."))
    m = cfg.model
    assert (m.name, m.seed, m.params, m.max_batches, m.max_candidates) == (
        None,
        0,
        {},
        10,
        1_000_000,
    )
    assert (m.inputs, m.exclusions, m.calibration) == ([], [], None)
    e = m.execution
    assert (e.max_workers, e.batch_size, e.backend, e.max_retries, e.retry_delay) == (
        1,
        256,
        "thread",
        0,
        1.0,
    )
    assert cfg.canonical == b'{"purpose":"model","recipe":"m:f","target_count":1}'
    explicit = validate_job(
        {"recipe": "m:f", "target_count": 1, "purpose": "model", "seed": 0}, Path(".")
    )
    assert explicit.model == m
    assert explicit.sha256 != cfg.sha256  # what the user wrote is the identity


def test_name_as_written_or_from_the_recipe_module() -> None:
    named = validate_job(_with(name="sums.v2"), Path("."))
    assert named.partition_key == f"sums.v2-{named.hash12}"
    assert default_name("pkg.recipes.Word_Problems:create") == "word_problems"
    assert default_name("_private:make") == "private"
    assert default_name("__main__:make") == "main__"
    assert default_name("arith:f") == "arith"


def test_calibration_shape_is_validated() -> None:
    cfg = validate_job(
        _with(calibration={"implementation": "pkg.solver:make", "repeats": 3, "params": {"t": 1}}),
        Path("."),
    )
    assert cfg.model.calibration == CalibrationSpec(
        implementation="pkg.solver:make", repeats=3, params={"t": 1}
    )
    assert b'"calibration"' in cfg.canonical  # calibration changes what is selected
    assert "repeats: Input should be greater than or equal to 1, got 0" in _error(
        _with(calibration={"implementation": "a:b", "repeats": 0})
    )
    assert "missing required key 'calibration.implementation' (required: implementation)" in (
        _error(_with(calibration={"repeats": 2}))
    )
    assert "is not a 'module:callable' reference" in _error(
        _with(calibration={"implementation": "solver"})
    )


# --- validation messages ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "key", "where", "model"),
    [
        (_with(target=5), "target", "the top level", JobConfig),
        (_with(execution={"workers": 2}), "workers", "[execution]", ExecutionSpec),
        (
            _with(calibration={"implementation": "a:b", "repeat": 2}),
            "repeat",
            "[calibration]",
            CalibrationSpec,
        ),
    ],
)
def test_unknown_key_names_the_key_and_the_allowed_ones(
    raw: dict[str, Any], key: str, where: str, model: type[Any]
) -> None:
    message = _error(raw)
    assert f"unknown key {key!r} in {where}; allowed: " in message
    listed = message.split("allowed:", 1)[1].split(", ")
    assert [s.strip() for s in listed] == list(model.model_fields)


def test_params_are_the_recipes_own_and_take_any_key() -> None:
    cfg = validate_job(_with(params={"anything": {"nested": [1, "x"]}}), Path("."))
    assert cfg.model.params == {"anything": {"nested": [1, "x"]}}


@pytest.mark.parametrize(
    "bad",
    ["arith", "a:", ":f", "a:b:c", "a..b:f", "a.b:f.", "1a:f", "a-b:f", "a:class", " a:f", "a/b:f"],
)
def test_recipe_must_be_module_colon_callable(bad: str) -> None:
    message = _error(_with(recipe=bad))
    assert f"recipe: {bad!r} is not a 'module:callable' reference" in message
    assert "allowed: dotted Python identifiers" in message


@pytest.mark.parametrize("good", ["m:f", "a.b.c:f", "a:Factory.create", "_x:_y"])
def test_recipe_forms_that_are_accepted(good: str) -> None:
    assert validate_job(_with(recipe=good), Path(".")).model.recipe == good


@pytest.mark.parametrize("bad", ["train", "Harness", "", None, 1])
def test_purpose_must_be_one_of_three(bad: Any) -> None:
    message = _error(_with(purpose=bad))
    assert f"purpose: {shown(bad)} is not allowed; allowed: harness, model, joint" in message
    if isinstance(bad, str) and bad:  # a value that is no short lowercase word is not quoted
        assert (repr(bad) in message) == (bad == "train"), message


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"target_count": 0}, "target_count: Input should be greater than or equal to 1, got 0"),
        ({"target_count": "8"}, "target_count: Input should be a valid integer, got '8'"),
        ({"target_count": True}, "target_count: Input should be a valid integer, got True"),
        ({"target_count": 8.0}, "target_count: Input should be a valid integer, got 8.0"),
        ({"seed": -1}, "seed: Input should be greater than or equal to 0, got -1"),
        ({"max_batches": 0}, "max_batches: Input should be greater than or equal to 1, got 0"),
        ({"max_candidates": 0}, "max_candidates: Input should be greater than or equal to 1"),
        ({"params": [1]}, "params: Input should be a valid dictionary, got a list"),
        ({"inputs": "a.jsonl"}, "inputs: Input should be a valid list, got 'a.jsonl'"),
        ({"inputs": ["a", "a"]}, "inputs: Value error, file paths must be distinct; repeated: a"),
        ({"execution": {"backend": "fork"}}, "execution.backend: 'fork' is not allowed; allowed:"),
        ({"execution": {"max_workers": 0}}, "execution.max_workers: Input should be greater than"),
        ({"execution": {"batch_size": 0}}, "execution.batch_size: Input should be greater than"),
        ({"execution": {"max_retries": -1}}, "execution.max_retries: Input should be greater"),
        (
            {"execution": {"retry_delay": 0}},
            "execution.retry_delay: Input should be greater than 0",
        ),
        ({"name": "Bad/x"}, "name is not a path-safe name: it has uppercase letters; allowed:"),
        ({"name": "x/y"}, "name is not a path-safe name: it has '/'; allowed: lowercase"),
        (
            {"inputs": [{"corpus": "BAD"}]},
            "inputs[0].corpus = <3 characters, not shown> is not a corpus partition key; "
            "expected <dataset>-",
        ),
        (
            {"inputs": [{"korpus": "x"}]},
            "inputs[0] is a table of korpus: allowed: a file path, or {corpus: <partition key>}",
        ),
        (
            {"inputs": [{"corpus": "a-b-0123456789ab"}, {"corpus": "a-b-0123456789ab"}]},
            "inputs must be distinct; repeated: corpus a-b-0123456789ab",
        ),
    ],
)
def test_bad_values_name_the_key_and_the_value(changes: dict[str, Any], expected: str) -> None:
    assert expected.replace("Value error, ", "") in _error(_with(**changes))


def test_missing_required_keys_are_all_named() -> None:
    message = _error({"recipe": "m:f"})
    assert "missing required key 'target_count' (required: recipe, target_count, purpose)" in (
        message
    )
    assert "missing required key 'purpose'" in message


# --- input and exclusion files ------------------------------------------------------------------


def test_inputs_and_exclusions_resolve_against_the_config_folder(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "seed.jsonl").write_text("{}\n")
    (tmp_path / "old-public.jsonl").write_text('{"task_id": "t1"}\n')
    elsewhere = tmp_path / "abs.jsonl"
    elsewhere.write_text("{}\n")
    job = tmp_path / "jobs" / "job.yaml"
    job.parent.mkdir()
    body = _with(inputs=["../data/seed.jsonl", str(elsewhere)], exclusions=["../old-public.jsonl"])
    job.write_text(json.dumps(body), encoding="utf-8")  # JSON is YAML
    cfg = load_job_config(job)
    assert cfg.inputs == ((tmp_path / "data" / "seed.jsonl").resolve(), elsewhere.resolve())
    assert cfg.exclusions == ((tmp_path / "old-public.jsonl").resolve(),)
    assert all(p.is_absolute() for p in cfg.inputs + cfg.exclusions)
    assert b"../data/seed.jsonl" in cfg.canonical  # the identity keeps what was written


@pytest.mark.parametrize("field", ["inputs", "exclusions"])
def test_a_missing_file_is_named(tmp_path: Path, field: str) -> None:
    (tmp_path / "here.jsonl").write_text("{}\n")
    message = _error(_with(**{field: ["here.jsonl", "gone.jsonl"]}), tmp_path)
    assert message == (
        f"{field}[1] = 'gone.jsonl': not found (resolved to {(tmp_path / 'gone.jsonl').resolve()})"
    )
    (tmp_path / "adir").mkdir()
    assert "is not a file" in _error(_with(**{field: ["adir"]}), tmp_path)


# --- files and formats --------------------------------------------------------------------------


def test_config_file_suffix_and_reading(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"must end in \.yaml, \.yml, \.toml, \.json"):
        load_job_config(tmp_path / "job.ini")
    with pytest.raises(ConfigError, match="job config not found"):
        load_job_config(tmp_path / "job.yaml")
    (tmp_path / "latin.yaml").write_bytes(b"recipe: caf\xe9:f\n")
    with pytest.raises(ConfigError, match="is not UTF-8"):
        load_job_config(tmp_path / "latin.yaml")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: 1\na: 2\n", "duplicate key 'a' in YAML config (line 2)"),
        ("params:\n  k: 1\n  k: 2\n", "duplicate key 'k' in YAML config (line 3)"),
        ("1: x\n", "YAML key 1 on line 1 is not a string; quote it"),
        ("on: x\n", "YAML key True on line 1 is not a string; quote it"),
        ("- 1\n", "config must be a YAML mapping, got list"),
        ("", "config must be a YAML mapping, got NoneType"),
        ("a: [\n", "config is not valid YAML: expected the node content"),
        ("seed: 2020-01-01\n", "seed: date values are not allowed; use a string"),
        ("seed: .nan\n", "seed: non-finite number nan is not allowed"),
        ("a: !!python/object:os.system x\n", "config is not valid YAML: could not determine"),
    ],
)
def test_yaml_problems_are_one_line_config_errors(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_job_text(text, "yaml")
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_toml_and_json_use_the_corpus_config_parser() -> None:
    with pytest.raises(ConfigError, match="duplicate key 'seed' in JSON config"):
        parse_job_text('{"seed": 1, "seed": 2}', "json")
    with pytest.raises(ConfigError, match="config is not valid TOML"):
        parse_job_text("seed = = 1", "toml")
    with pytest.raises(ConfigError, match="unknown config format 'ini'; allowed: yaml, toml"):
        parse_job_text("", "ini")
