"""The arithmetic recipe's issue-12 hooks, called directly (no executor): shards and ranking."""

from __future__ import annotations

import hashlib
import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corpus_assets.recipes import arithmetic
from corpus_assets.recipes.arith_families import FAMILIES, STREAMS, Stream
from corpus_assets.recipes.arithmetic import create_recipe, interleaved
from corpus_assets.tasks.ranking import (
    InMemoryRanking,
    RankedCandidate,
    RankedSelection,
    SelectionPolicy,
    select_ranked_candidates,
)
from corpus_assets.tasks.types import (
    DataSample,
    GenerateContext,
    GenerationShard,
    InsufficientDataError,
    PublicTask,
    Selection,
)


def context(batch: int = 0, seed: int = 0, target: int = 64) -> GenerateContext:
    """A generation context for the model purpose."""
    return GenerateContext(seed=seed, batch_index=batch, target_count=target, purpose="model")


def round_robin(quotas: list[int]) -> list[tuple[int, int]]:
    """(stream, round) of every position, walked naively round by round."""
    return [
        (stream, round_index)
        for round_index in range(max(quotas, default=0))
        for stream, quota in enumerate(quotas)
        if round_index < quota
    ]


@settings(max_examples=200, deadline=None)
@given(
    quotas=st.lists(st.integers(0, 6), min_size=0, max_size=16),
    start=st.integers(0, 100),
    length=st.integers(0, 100),
)
def test_interleaved_positions_match_the_naive_round_robin(
    quotas: list[int], start: int, length: int
) -> None:
    assert (
        list(interleaved(quotas, start, start + length))
        == round_robin(quotas)[start : start + length]
    )


@pytest.mark.parametrize(
    ("params", "batch_index", "size"),
    [
        ({}, 0, 64),
        ({"candidate_count": 40, "maximum_per_recipe": 5}, 0, 40),
        ({"candidate_count": 40, "maximum_per_recipe": 5}, 3, 40),  # the cap is the selection's
        ({"candidate_count": 37, "maximum_per_recipe": 4}, 1, 37),  # 5 x 3 + 11 x 2
        ({"candidate_count": 5}, 2, 5),  # 5 streams of 1, 11 of none
    ],
)
@pytest.mark.parametrize("shard_size", [1, 3, 16, 17, 1000])
def test_generate_is_the_concatenation_of_its_shards(
    params: dict[str, int], batch_index: int, size: int, shard_size: int
) -> None:
    recipe = create_recipe(**params)
    ctx = context(batch_index, seed=5)
    whole = list(recipe.generate(ctx))
    shards = list(recipe.generation_shards(ctx, shard_size))
    assert len(whole) == size
    assert [s.start for s in shards] == list(range(0, size, shard_size))
    assert all(s.stop - s.start == shard_size for s in shards[:-1])
    assert not shards or 1 <= shards[-1].stop - shards[-1].start <= shard_size
    assert (shards[-1].stop if shards else 0) == size
    joined = [sample for shard in shards for sample in recipe.generate_shard(ctx, shard)]
    assert joined == whole


def test_a_shard_past_the_end_is_short_and_bad_shards_are_refused() -> None:
    recipe = create_recipe(candidate_count=16)
    whole = list(recipe.generate(context()))
    assert list(recipe.generate_shard(context(), GenerationShard(10, 30))) == whole[10:]
    assert list(recipe.generate_shard(context(), GenerationShard(40, 50))) == []
    for size in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="shard_size must be an integer >= 1"):
            list(recipe.generation_shards(context(), size))  # type: ignore[arg-type]
    for start, stop in ((-1, 3), (5, 4)):
        with pytest.raises(ValueError, match="0 <= start <= stop"):
            list(recipe.generate_shard(context(), GenerationShard(start, stop)))


def counting_streams(calls: list[str]) -> tuple[Stream, ...]:
    """`STREAMS` with builders that log their stream's name in `calls`."""

    def counted(stream: Stream) -> Stream:
        def build(rng: object) -> object:
            calls.append(stream.name)
            return stream.build(rng)  # type: ignore[arg-type]

        return Stream(stream.family, stream.structure, build)  # type: ignore[arg-type]

    return tuple(counted(stream) for stream in STREAMS)


def test_a_late_shard_builds_only_its_own_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    recipe = create_recipe(candidate_count=100_000, maximum_per_recipe=10**6)
    calls: list[str] = []
    monkeypatch.setattr(arithmetic, "STREAMS", counting_streams(calls))
    shards = list(recipe.generation_shards(context(), 7))
    assert len(shards) == 14_286 and shards[-1] == GenerationShard(99_995, 100_000)
    late = list(recipe.generate_shard(context(), GenerationShard(99_990, 99_997)))
    assert len(late) == len(calls) == 7
    assert calls == [s.task.metadata["stream"] for s in late]
    assert calls == [s.name for s in STREAMS[6:13]]  # round 6249 of 6250, from its 7th stream
    calls.clear()
    first = list(itertools.islice(recipe.generate(context()), 3))
    assert calls == [s.name for s in STREAMS[:3]] == [s.task.metadata["stream"] for s in first]


def sample(task_id: str, family: str = "fractions", structure: str = "sum") -> DataSample:
    """A hand-made sample of `family/structure` (ranking reads only its id and metadata)."""
    meta = {"family": family, "structure": structure, "stream": f"{family}/{structure}"}
    return DataSample(PublicTask(task_id, {"problem": "p", "values": {}}, meta), {"answer": "1"})


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ((), None),  # not calibrated
        ((None, 1.0), None),  # incomplete
        ((0.0, None), None),
        ((None, None), None),
        ((1.0, 1.0), None),  # too easy
        ((1.0,), None),
        ((1.0, 0.0), (0.0, 1)),
        ((0.0, 1.0), (0.0, 1)),
        ((1.0, 0.0, 1.0), (0.0, 2)),
        ((0.0, 0.0), (1.0, 0)),
        ((0.0,), (1.0, 0)),
    ],
)
def test_rank_rules(scores: tuple[float | None, ...], expected: tuple[float, int] | None) -> None:
    recipe = create_recipe()
    ranked = recipe.rank(sample("arith-t", "gcd_lcm", "lcm_buses"), scores, context(seed=3))
    if expected is None:
        assert ranked is None
        return
    priority, correct = expected
    assert ranked == RankedCandidate(
        task_id="arith-t",
        priority=priority,
        tie_breaker=hashlib.sha256(b"3\0arith-t").hexdigest()[:16],
        group="gcd_lcm",
        bucket="gcd_lcm/lcm_buses@0",
        metadata={
            "correct": correct,
            "repeats": len(scores),
            "family": "gcd_lcm",
            "stream": "gcd_lcm/lcm_buses",
        },
    )


def test_rank_golden_tie_breaker_depends_on_the_seed_only() -> None:
    recipe = create_recipe()
    task = sample("arith-0123456789abcdef")
    ranked = recipe.rank(task, (0.0, 0.0), context(batch=2, seed=0))
    assert ranked is not None and ranked.tie_breaker == "cccf30bcf9b7daec"
    again = recipe.rank(task, (1.0, 0.0), context(batch=0, seed=0))
    other = recipe.rank(task, (1.0, 0.0), context(batch=0, seed=1))
    assert again is not None and again.tie_breaker == ranked.tie_breaker
    assert other is not None and other.tie_breaker != ranked.tie_breaker


def test_selection_policy_for_both_flags() -> None:
    assert create_recipe().selection_policy(context(), False) is None
    assert create_recipe(minimum_per_family=2).selection_policy(context(), False) is None
    assert create_recipe(maximum_per_recipe=9, minimum_per_family=0).selection_policy(
        context(), True
    ) == SelectionPolicy(minimum_per_group={}, maximum_per_bucket=9)
    assert create_recipe().selection_policy(context(), True) == SelectionPolicy(
        minimum_per_group=dict.fromkeys(FAMILIES, 1), maximum_per_bucket=1000
    )
    policy = create_recipe(minimum_per_family=2).selection_policy(context(), True)
    assert policy == SelectionPolicy(
        minimum_per_group=dict.fromkeys(FAMILIES, 2), maximum_per_bucket=1000
    )
    assert policy is not None and list(policy.minimum_per_group) == list(FAMILIES)


def ranked(task_id: str, correct: int, family: str = "fractions") -> RankedCandidate:
    """A ranked candidate as `rank` gives it for two repeats with `correct` right."""
    candidate = create_recipe().rank(
        sample(task_id, family), (1.0,) * correct + (0.0,) * (2 - correct), context()
    )
    assert candidate is not None
    return candidate


def test_finalize_selection_succeeds_with_statistics() -> None:
    recipe = create_recipe(minimum_one_pass=2)
    chosen = (
        ranked("a", 1),
        ranked("b", 1, "counting"),
        ranked("c", 0, "counting"),
    )
    result = recipe.finalize_selection(RankedSelection(chosen, {}), 10, context(target=3))
    assert result == Selection(
        ("a", "b", "c"),
        {
            "calibrated": True,
            "eligible": 10,
            "selected": 3,
            "correct_once": 2,
            "wrong_always": 1,
            "per_family": {"counting": 2, "fractions": 1},
            "per_stream": {"counting/sum": 2, "fractions/sum": 1},
        },
    )
    json.dumps(result.statistics)


@pytest.mark.parametrize(
    ("unmet", "target", "minimum_one_pass", "message"),
    [
        ({}, 4, 0, "took 3 of 4 task.* from 7 eligible"),
        ({"averages": 2}, 3, 0, "family minimums \\(averages 2 more .* 7 eligible"),
        ({}, 3, 3, "2 task.* right in some but not all .* minimum_one_pass 3 \\(7 eligible"),
    ],
)
def test_finalize_selection_raises_when_short(
    unmet: dict[str, int], target: int, minimum_one_pass: int, message: str
) -> None:
    recipe = create_recipe(minimum_one_pass=minimum_one_pass)
    chosen = (ranked("a", 1), ranked("b", 1), ranked("c", 0))
    with pytest.raises(InsufficientDataError, match=message):
        recipe.finalize_selection(RankedSelection(chosen, unmet), 7, context(target=target))


def outcome_of(task_id: str, family: str) -> tuple[float | None, ...]:
    """Hand-made repeat scores: incomplete, twice right, once right or twice wrong, by hash."""
    bucket = int(hashlib.sha256(task_id.encode()).hexdigest(), 16) % 4
    if family == "counting":  # no counting task is right once: its minimum takes wrong ones
        bucket = 3 if bucket == 2 else bucket
    return ((None, 1.0), (1.0, 1.0), (0.0, 1.0), (0.0, 0.0))[bucket]


def test_end_to_end_calibrated_selection_in_memory() -> None:
    recipe = create_recipe(candidate_count=160, minimum_per_family=3, minimum_one_pass=10)
    scores: dict[str, tuple[float | None, ...]] = {}
    candidates: list[RankedCandidate] = []
    for batch_index in range(2):
        ctx = context(batch_index, seed=11)
        for task in recipe.generate(ctx):
            scores[task.task_id] = outcome_of(task.task_id, str(task.task.metadata["family"]))
            candidate = recipe.rank(task, scores[task.task_id], ctx)
            if candidate is not None:
                candidates.append(candidate)
    ctx = context(1, seed=11, target=120)  # more than the once-right tasks
    policy = recipe.selection_policy(ctx, True)
    assert policy is not None
    taken = select_ranked_candidates(InMemoryRanking(candidates), ctx.target_count, policy)
    result = recipe.finalize_selection(taken, len(candidates), ctx)
    assert len(result.task_ids) == 120 and len(set(result.task_ids)) == 120
    for task_id in result.task_ids:
        assert None not in scores[task_id] and scores[task_id] != (1.0, 1.0)
    by_id = {c.task_id: c for c in candidates}
    order = [by_id[t] for t in result.task_ids]
    minima = order[: 3 * len(FAMILIES)]  # the family minima come first, in FAMILIES order
    assert [c.group for c in minima] == [f for f in FAMILIES for _ in range(3)]
    rest = order[3 * len(FAMILIES) :]
    assert [c.priority for c in rest] == sorted(c.priority for c in rest)
    assert 0.0 in {c.priority for c in rest} and 1.0 in {c.priority for c in rest}
    once_right = {c.task_id for c in candidates if c.priority == 0.0}
    assert once_right <= set(result.task_ids)  # a twice-wrong task only after all of them
    wrong_in_minima = [c for c in minima if c.priority == 1.0]
    assert wrong_in_minima and {c.group for c in wrong_in_minima} == {"counting"}
    stats = result.statistics
    assert stats["correct_once"] == len(once_right) >= recipe.minimum_one_pass
    assert stats["correct_once"] + stats["wrong_always"] == 120
    assert stats["per_family"]["counting"] >= 3 and stats["eligible"] == len(candidates)
