"""`select_ranked_candidates`: group minima, then global rank, bucket caps; memory = disk."""

from __future__ import annotations

import sqlite3
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corpus_assets.tasks.ranking import (
    InMemoryRanking,
    RankedCandidate,
    RankingTable,
    SelectionPolicy,
    select_ranked_candidates,
)


def c(
    task_id: str, priority: float, group: str = "g", bucket: str = "b", tie: str = ""
) -> RankedCandidate:
    return RankedCandidate(task_id, priority, tie, group, bucket, {"id": task_id})


def on_disk(candidates: list[RankedCandidate]) -> RankingTable:
    table = RankingTable(sqlite3.connect(":memory:"))
    table.insert(candidates)
    return table


def test_minima_in_policy_order_then_the_best_globally() -> None:
    pool = [
        c("a1", 0.1, "a", "x"),
        c("a2", 0.2, "a", "x"),
        c("a3", 0.3, "a", "y"),
        c("b1", 0.9, "b", "y"),
        c("b2", 0.95, "b", "x"),
        c("c1", 0.05, "c", "z"),
    ]
    policy = SelectionPolicy({"b": 1, "a": 1}, maximum_per_bucket=2)
    result = select_ranked_candidates(InMemoryRanking(pool), 4, policy)
    # b's minimum first (b1), then a's (a1), then globally: c1 (0.05), a2 (0.2; x has a1 only)
    assert result.task_ids == ("b1", "a1", "c1", "a2")
    assert result.unmet_minimums == {}
    assert select_ranked_candidates(on_disk(pool), 4, policy) == result


def test_bucket_caps_are_never_exceeded_and_unmet_minima_are_reported() -> None:
    pool = [c(f"t{i}", i, "g", "same") for i in range(5)] + [c("h", 9, "h", "same")]
    result = select_ranked_candidates(
        InMemoryRanking(pool), 5, SelectionPolicy({"h": 2}, maximum_per_bucket=3)
    )
    assert result.task_ids == ("h", "t0", "t1")
    assert result.unmet_minimums == {"h": 1}


def test_ties_break_by_tie_breaker_then_task_id() -> None:
    pool = [c("z", 1.0, tie="a"), c("b", 1.0, tie="b"), c("a", 1.0, tie="b"), c("y", 0.5)]
    result = select_ranked_candidates(InMemoryRanking(pool), 4, SelectionPolicy())
    assert result.task_ids == ("y", "z", "a", "b")


def test_a_provider_repeating_an_id_never_selects_it_twice() -> None:
    class Repeating:
        def ordered(self, group: str | None = None) -> list[RankedCandidate]:
            return [c("a", 0.1), c("a", 0.1), c("b", 0.2)]

    result = select_ranked_candidates(Repeating(), 3, SelectionPolicy({"g": 1}))
    assert result.task_ids == ("a", "b")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"priority": float("nan")}, "finite"),
        ({"priority": float("inf")}, "finite"),
        ({"priority": True}, "number"),
        ({"priority": 1.0, "group": 3}, "group must be a string"),
    ],
)
def test_a_bad_rank_is_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RankedCandidate("t", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"when": object()}, "metadata is not JSON: Object of type object"),
        ({"score": float("nan")}, "metadata is not JSON: Out of range float"),
        ({"nested": [{1: "a"}]}, "metadata must be a JSON object"),
        ({2: "two"}, "metadata must be a JSON object"),
        (["not", "a", "mapping"], "metadata must be a JSON object"),
    ],
)
def test_rank_metadata_must_be_json_and_the_error_names_the_candidate(
    metadata: object, message: str
) -> None:
    with pytest.raises(ValueError, match=f"^rank of 'cand-7': {message}"):
        RankedCandidate("cand-7", 0.5, metadata=metadata)  # type: ignore[arg-type]
    candidate = RankedCandidate("cand-8", 0.5, metadata={"a": [1, 2.5, None, {"b": True}]})
    assert list(on_disk([candidate]).ordered()) == [candidate]


def test_a_bad_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="minimum_per_group"):
        SelectionPolicy({"g": -1})
    with pytest.raises(ValueError, match="maximum_per_bucket"):
        SelectionPolicy(maximum_per_bucket=0)


candidates = st.lists(
    st.builds(
        RankedCandidate,
        task_id=st.text(alphabet="abcdefé😀", min_size=1, max_size=4),
        priority=st.floats(-10, 10, allow_nan=False) | st.sampled_from([0.0, -0.0, 1.0]),
        tie_breaker=st.sampled_from(["", "x", "y", "ÿ"]),
        group=st.sampled_from(["g1", "g2", "g3"]),
        bucket=st.sampled_from(["b1", "b2"]),
    ),
    max_size=40,
    unique_by=lambda r: r.task_id,
)
policies = st.builds(
    SelectionPolicy,
    minimum_per_group=st.dictionaries(
        st.sampled_from(["g1", "g2", "g3", "none"]), st.integers(0, 5), max_size=3
    ),
    maximum_per_bucket=st.none() | st.integers(1, 10),
)


@settings(max_examples=300, deadline=None)
@given(candidates, st.integers(0, 30), policies)
def test_memory_and_disk_agree_and_the_rules_hold(
    pool: list[RankedCandidate], target: int, policy: SelectionPolicy
) -> None:
    memory = select_ranked_candidates(InMemoryRanking(pool), target, policy)
    assert select_ranked_candidates(on_disk(pool), target, policy) == memory
    ids = memory.task_ids
    assert len(ids) == len(set(ids)) <= target
    if policy.maximum_per_bucket is not None:
        assert max(Counter(r.bucket for r in memory.selected).values(), default=0) <= (
            policy.maximum_per_bucket
        )
    rank = sorted(pool, key=RankedCandidate.order)
    if policy.maximum_per_bucket is None:
        # Without caps: minima are met when the group has enough, and the rest is the best.
        for group, minimum in policy.minimum_per_group.items():
            have = sum(1 for r in pool if r.group == group)
            picked = sum(1 for r in memory.selected if r.group == group)
            assert picked >= min(minimum, have) or len(ids) == target
        if not policy.minimum_per_group:
            assert list(ids) == [r.task_id for r in rank[:target]]
