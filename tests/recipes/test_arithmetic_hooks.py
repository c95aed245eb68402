"""The arithmetic recipe's issue-12 hooks, called directly (no executor): shards and ranking."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corpus_assets.recipes import arithmetic
from corpus_assets.recipes.arith_families import STREAMS, Stream
from corpus_assets.recipes.arithmetic import create_recipe, interleaved
from corpus_assets.tasks.types import GenerateContext, GenerationShard


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
        ({"candidate_count": 40, "maximum_per_recipe": 5}, 1, 32),  # the cap truncates 8 streams
        ({"candidate_count": 40, "maximum_per_recipe": 5}, 2, 8),  # only the last 8 streams
        ({"candidate_count": 40, "maximum_per_recipe": 5}, 3, 0),  # every stream exhausted
        ({"candidate_count": 37, "maximum_per_recipe": 4}, 1, 27),  # 5 x 1 + 11 x 2
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
