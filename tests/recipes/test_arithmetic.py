"""The arithmetic example recipe, driven directly (no executor): generation, answers, scoring."""

from __future__ import annotations

import importlib
import json
import math
import multiprocessing
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from corpus_assets.recipes.arith_answers import format_answer, last_boxed, parse_answer
from corpus_assets.recipes.arith_families import STREAMS
from corpus_assets.recipes.arithmetic import ArithmeticRecipe, RecipeParamError, create_recipe
from corpus_assets.tasks.types import (
    DataSample,
    GenerateContext,
    InsufficientDataError,
    PublicTask,
    Recipe,
)

REPO = Path(__file__).resolve().parents[2]
CANONICAL = re.compile(r"-?\d+|-?\d+\.\d*[1-9]|-?\d+/\d+")


def context(batch: int = 0, seed: int = 0, target: int = 64) -> GenerateContext:
    """A generation context for the harness purpose."""
    return GenerateContext(seed=seed, batch_index=batch, target_count=target, purpose="harness")


def batch(recipe: ArithmeticRecipe, batch_index: int = 0, seed: int = 0) -> list[DataSample]:
    """One batch as a list."""
    return list(recipe.generate(context(batch_index, seed)))


def samples_json(seed: int, batch_index: int, params: dict[str, int]) -> list[dict[str, Any]]:
    """A batch as JSON rows (run in a spawned process too)."""
    recipe = create_recipe(**params)
    return [s.to_json() for s in recipe.generate(context(batch_index, seed))]


def first_of(samples: list[DataSample], stream: str) -> DataSample:
    """The first sample of `stream` in a batch."""
    return next(s for s in samples if s.task.metadata["stream"] == stream)


def test_golden_first_samples_of_two_streams() -> None:
    samples = batch(create_recipe())
    fractions = first_of(samples, "fractions/sum")
    assert fractions.task.input["problem"] == (
        "Mia drank 1/7 of a litre of juice in the morning and 5/10 of a litre in the afternoon. "
        "How many litres did she drink in total?"
    )
    assert fractions.reference == {"answer": "9/14"}
    assert fractions.task_id == "arith-6a83f76ad811e3db"
    linear = first_of(samples, "linear_equations/two_sides")
    assert linear.task.input["problem"] == "Solve for x: 2x - 37 = 8x + 36. What is x?"
    assert linear.reference == {"answer": "-73/6"}
    assert linear.task_id == "arith-39798690e222e93f"


def expected_answer(structure: str, v: dict[str, Any]) -> Fraction:
    """The answer recomputed from the exposed operands, by means other than the recipe's."""
    if structure == "sum":
        return Fraction(v["a"] * v["d"] + v["c"] * v["b"], v["b"] * v["d"])
    if structure == "of_quantity":
        return Fraction(v["a"] * v["n"], v["b"])
    if structure == "percent_of":
        return Fraction(v["p"]) / 100 * Fraction(v["n"])
    if structure == "percent_change":
        return Fraction(100 * v["b"], v["a"]) - 100
    if structure == "one_side":
        return (Fraction(v["c"]) - Fraction(v["b"])) / Fraction(v["a"])
    if structure == "two_sides":
        return Fraction(v["b"] - v["d"], v["c"] - v["a"])
    if structure == "gcd_tiles":
        return Fraction(max(t for t in range(1, v["a"] + 1) if v["a"] % t == v["b"] % t == 0))
    if structure == "lcm_buses":
        return Fraction(
            next(t for t in range(v["a"], v["a"] * v["b"] + 1, v["a"]) if t % v["b"] == 0)
        )
    if structure == "share":
        return Fraction(v["n"] - v["k"] * (v["n"] // v["k"]))
    if structure == "power":
        return Fraction(v["a"] ** v["e"] % v["m"])
    if structure == "laps":
        return Fraction(v["metres"]) / 1000 * Fraction(v["laps"])
    if structure == "speed":
        return Fraction(v["speed"]) * Fraction(v["minutes"], 60)
    if structure == "committees":
        n, k = v["n"], v["k"]
        return Fraction(math.factorial(n), math.factorial(k) * math.factorial(n - k))
    if structure == "podium":
        return Fraction(math.prod(range(v["n"] - v["k"] + 1, v["n"] + 1)))
    if structure == "mean":
        return Fraction(sum(v["scores"])) / len(v["scores"])
    if structure == "missing":
        return Fraction(v["mean"]) * (len(v["known"]) + 1) - Fraction(sum(v["known"]))
    raise AssertionError(f"no independent check for structure {structure}")


def numbers_in(text: str) -> list[int]:
    """The integers written in a problem's text (a leading minus kept only when unspaced)."""
    return [int(n) for n in re.findall(r"(?<![\w/])-?\d+|(?<=/)\d+", text)]


@pytest.mark.parametrize("seed", [0, 7])
def test_every_family_answer_is_exactly_right(seed: int) -> None:
    recipe = create_recipe(candidate_count=160)
    seen: set[str] = set()
    for index in range(3):
        for sample in batch(recipe, index, seed):
            meta, values = sample.task.metadata, sample.task.input["values"]
            answer = sample.reference["answer"]
            assert CANONICAL.fullmatch(answer), answer
            assert Fraction(answer) == expected_answer(meta["structure"], values), sample
            assert recipe.clean(sample) == sample  # generated samples are already clean
            flat = [x for val in values.values() for x in (val if isinstance(val, list) else [val])]
            written = numbers_in(sample.task.input["problem"].replace(" - ", " -"))
            unit_coefficient = {1} if meta["family"] == "linear_equations" else set()
            assert all(abs(x) in {*map(abs, written), *unit_coefficient} for x in flat), sample
            seen.add(meta["stream"])
    assert seen == {s.name for s in STREAMS} and len(seen) == 16
    assert {s.family for s in STREAMS} == {
        "fractions", "percentages", "linear_equations", "gcd_lcm",
        "remainders", "unit_conversion", "counting", "averages",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Fraction(-3), "-3"),
        (Fraction(0), "0"),
        (Fraction(9, 4), "2.25"),
        (Fraction(5, 2), "2.5"),
        (Fraction(-1, 8), "-0.125"),
        (Fraction(1, 20), "0.05"),
        (Fraction(3, -4), "-0.75"),
        (Fraction(-3, 7), "-3/7"),
        (Fraction(10, 6), "5/3"),
        (Fraction(7, 30), "7/30"),
        (Fraction(100, 10), "10"),
        (Fraction(1234567, 1000), "1234.567"),
    ],
)
def test_canonical_answer_format(value: Fraction, text: str) -> None:
    assert format_answer(value) == text
    assert Fraction(text) == value


def test_deterministic_across_instances_and_a_spawned_process() -> None:
    params = {"candidate_count": 48, "maximum_per_recipe": 10}
    here = [samples_json(3, 2, params), samples_json(3, 0, params)]
    again = [samples_json(3, 2, params), samples_json(3, 0, params)]
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        there = [pool.apply(samples_json, (3, 2, params)), pool.apply(samples_json, (3, 0, params))]
    assert here == again == there
    assert len(here[1]) == 48 and here[0] != here[1]
    assert batch(create_recipe(), 0, 0) != batch(create_recipe(), 0, 1)


def test_candidate_count_spreads_over_streams_and_the_cap_never_stops_generation() -> None:
    recipe = create_recipe(candidate_count=40, maximum_per_recipe=5)
    per_batch = [len(batch(recipe, index)) for index in range(4)]
    assert per_batch == [40, 40, 40, 40]  # the cap is the selection's (arith_select.bucket)
    streams = [s.task.metadata["stream"] for b in range(3) for s in batch(recipe, b)]
    counts = {name: streams.count(name) for name in set(streams)}
    # quotas 3 (first 8 streams) and 2 (last 8) in every batch
    assert len(counts) == 16 and sorted(counts.values()) == [6] * 8 + [9] * 8
    rebuilt = create_recipe(candidate_count=40, maximum_per_recipe=5)
    assert batch(rebuilt, 1) == batch(recipe, 1)


def test_clean_collapses_whitespace_and_rejects_degenerate() -> None:
    recipe = create_recipe()
    sample = batch(recipe)[0]
    assert recipe.clean(sample) == sample
    spaced = {
        **sample.task.input,
        "problem": "  Mia   drank\n\t" + sample.task.input["problem"][9:],
    }
    messy = DataSample(PublicTask("x", spaced, sample.task.metadata), sample.reference)
    cleaned = recipe.clean(messy)
    assert cleaned is not None and cleaned.task.input == sample.task.input
    assert cleaned.task_id == sample.task_id  # the id follows the cleaned content
    for bad_input, reference in [
        ({**sample.task.input, "problem": " \n "}, sample.reference),
        (sample.task.input, {"answer": "123456789012"}),
        (sample.task.input, {"answer": "1/99991"}),
        (sample.task.input, {"answer": "not a number"}),
        (sample.task.input, "1.5"),
        ("a bare string", sample.reference),
    ]:
        rejected = DataSample(PublicTask("x", bad_input, sample.task.metadata), reference)
        assert recipe.clean(rejected) is None, (bad_input, reference)


def sample_with(answer: str, family: str = "fractions") -> DataSample:
    """A sample whose reference is `answer`."""
    meta = {"family": family, "structure": "s", "stream": f"{family}/s"}
    return DataSample(
        PublicTask("arith-t", {"problem": "p", "values": {}}, meta), {"answer": answer}
    )


@pytest.mark.parametrize(
    ("answer", "response", "family", "score"),
    [
        ("0.75", "so \\boxed{3/4}", "fractions", 1.0),
        ("3/4", "\\boxed{0.75}", "fractions", 1.0),
        ("3/4", "\\boxed{\\frac{3}{4}}", "fractions", 1.0),
        ("3/4", "\\boxed{ 6/8 }", "fractions", 1.0),
        ("3/4", "\\boxed{0.7}", "fractions", 0.0),
        ("-2", "\\boxed{-2}", "linear_equations", 1.0),
        ("-2", "\\boxed{2}", "linear_equations", 0.0),
        ("1000", "\\boxed{1,000}", "counting", 1.0),
        ("1000", "\\boxed{1,00}", "counting", 0.0),
        ("12.5", "\\boxed{$12.50}", "unit_conversion", 1.0),
        ("12.5", "\\boxed{12.5%}", "percentages", 1.0),
        ("12.5", "\\boxed{12.5\\%}", "percentages", 1.0),
        ("12.5", "\\boxed{12.5%}", "unit_conversion", 0.0),
        ("5", "\\boxed{4} then \\boxed{5}", "counting", 1.0),
        ("4", "\\boxed{4} then \\boxed{5}", "counting", 0.0),
        ("5", "\\boxed{{5}}", "counting", 0.0),
        ("5", "\\boxed{5} and \\boxed{6", "counting", 1.0),
        ("5", "the answer is 5", "counting", 0.0),
        ("5", "\\boxed{}", "counting", 0.0),
        ("5", "\\boxed{5/0}", "counting", 0.0),
        ("5", "\\boxed{" + "9" * 5000 + "}", "counting", 0.0),
        ("5", "\\boxed{1e5}", "counting", 0.0),
    ],
)
def test_score_forms(answer: str, response: str, family: str, score: float) -> None:
    result = create_recipe().score(sample_with(answer, family), response)
    assert type(result) is float and result == score


@pytest.mark.parametrize("junk", [None, 5, 0.75, ["\\boxed{5}"], {"a": 1}, b"\\boxed{5}", ""])
def test_score_never_raises_on_junk(junk: object) -> None:
    assert create_recipe().score(sample_with("5"), junk) == 0.0


def test_last_boxed_handles_nesting() -> None:
    assert last_boxed("\\boxed{\\frac{1}{2}} x") == "\\frac{1}{2}"
    assert last_boxed("a \\boxed{1} b \\boxed{{2}{3}}") == "{2}{3}"
    assert last_boxed("no box") is None
    assert parse_answer("  -3/4 ") == Fraction(-3, 4)
    assert parse_answer("-\\frac{3}{4}") == Fraction(-3, 4)


def walk_keys(value: object) -> set[str]:
    """Every dict key anywhere inside `value`."""
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in walk_keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in walk_keys(v)}
    return set()


def test_no_answer_in_public_task() -> None:
    recipe = create_recipe(candidate_count=128)
    for sample in batch(recipe) + batch(recipe, 1):
        public = sample.task.to_json()
        assert set(public["metadata"]) == {"family", "structure", "stream"}
        assert set(public["input"]) == {"problem", "values"}
        assert not walk_keys(public) & {"answer", "reference", "solution"}
        answer = sample.reference["answer"]
        if not re.fullmatch(r"-?\d+", answer):  # small integers occur naturally in the text
            assert answer not in json.dumps(public), sample


def test_select_round_robin_with_coverage() -> None:
    recipe = create_recipe()
    samples = batch(recipe) + batch(recipe)  # every sample twice: ids must stay distinct
    chosen = recipe.select(samples, {}, context(target=40))
    ids = chosen.task_ids
    assert len(ids) == 40 and len(set(ids)) == 40
    assert set(ids) <= {s.task_id for s in samples}
    stats = chosen.statistics
    assert stats["calibrated"] is False and "not difficulty-calibrated" in stats["note"]
    assert len(stats["per_stream"]) == 16 and set(stats["per_stream"].values()) == {2, 3}
    assert len(stats["per_family"]) == 8 and sum(stats["per_family"].values()) == 40
    first_eight = [s.task.metadata["family"] for s in samples if s.task_id in ids[:8]]
    assert len(set(first_eight)) == 8  # a short round covers every family first
    assert recipe.select(list(reversed(samples)), {}, context(target=40)) == chosen
    assert recipe.select(samples, {}, context(target=len(set(s.task_id for s in samples))))


def test_select_raises_insufficient_data() -> None:
    recipe = create_recipe(candidate_count=16)
    samples = batch(recipe)
    with pytest.raises(InsufficientDataError, match="16 distinct candidate"):
        recipe.select(samples, {}, context(target=17))
    with pytest.raises(InsufficientDataError):
        recipe.select([], {}, context(target=1))


def test_training_row_shape() -> None:
    recipe = create_recipe()
    sample = batch(recipe)[0]
    row = recipe.training_row(sample)
    assert set(row) == {"task_id", "messages", "answer"}
    assert row["task_id"] == sample.task_id
    assert row["answer"] == "\\boxed{9/14}"
    [message] = row["messages"]
    assert message["role"] == "user"
    assert message["content"].startswith(sample.task.input["problem"])
    assert message["content"].endswith("Give the final answer within \\boxed{}.")
    assert recipe.score(sample, row["answer"]) == 1.0
    json.dumps(row)


def test_protocol_and_source_files() -> None:
    recipe = create_recipe()
    assert isinstance(recipe, Recipe)
    files = recipe.source_files()
    assert files[0] == REPO / "corpus_assets" / "recipes" / "arithmetic.py"
    assert all(path.is_file() for path in files)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"candidates": 5}, "unknown arithmetic recipe param.*candidates.*allowed: "
         "candidate_count, maximum_per_recipe, minimum_one_pass, minimum_per_family$"),
        ({"candidate_count": 0}, "candidate_count must be an integer >= 1, got 0"),
        ({"maximum_per_recipe": "10"}, "maximum_per_recipe must be an integer >= 1, got '10'"),
        ({"candidate_count": True}, "candidate_count must be an integer >= 1, got True"),
        ({"minimum_per_family": -1}, "minimum_per_family must be an integer >= 0, got -1"),
        ({"minimum_one_pass": 1.0}, "minimum_one_pass must be an integer >= 0, got 1.0"),
        ({"minimum_one_pass": False}, "minimum_one_pass must be an integer >= 0, got False"),
    ],
)  # fmt: skip
def test_bad_params_rejected(params: dict[str, object], message: str) -> None:
    with pytest.raises(RecipeParamError, match=message) as raised:
        create_recipe(**params)
    assert isinstance(raised.value, ValueError)


def test_calibration_minimums_default_to_family_coverage_and_accept_zero() -> None:
    default = create_recipe()
    assert (default.minimum_per_family, default.minimum_one_pass) == (1, 0)
    recipe = create_recipe(minimum_per_family=0, minimum_one_pass=3)
    assert (recipe.minimum_per_family, recipe.minimum_one_pass) == (0, 3)


def test_example_job_config_names_the_factory() -> None:
    config = yaml.safe_load((REPO / "examples" / "tasks" / "arithmetic.yaml").read_text())
    assert config == {
        "recipe": "corpus_assets.recipes.arithmetic:create_recipe",
        "target_count": 64,
        "purpose": "harness",
        "seed": 0,
        "params": {"candidate_count": 64, "maximum_per_recipe": 1000},
        "max_batches": 4,
    }
    module, name = config["recipe"].split(":")
    recipe = getattr(importlib.import_module(module), name)(**config["params"])
    samples = [s for b in range(config["max_batches"]) for s in batch(recipe, b, config["seed"])]
    chosen = recipe.select(samples, {}, context(target=config["target_count"]))
    assert len(chosen.task_ids) == 64
