"""The arithmetic recipe's selection, without calibration and with it.

Without calibration: round-robin over streams, by task id within a stream. With calibration:
a task is eligible when every repeat was graded and it was not right in all of them; tasks
right in some repeats rank before tasks never right, in a seeded shuffle within each level.
A candidate's bucket is its stream in its batch, so `maximum_per_recipe` caps how many tasks
one stream gives from one batch: a later batch's candidates of that stream are still taken.
The executor merges the ranked candidates (`corpus_assets.tasks.ranking`); `finalize` checks
the result against the target and the family and one-pass minimums.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from corpus_assets.recipes.arith_families import FAMILIES
from corpus_assets.tasks.ranking import RankedCandidate, RankedSelection, SelectionPolicy
from corpus_assets.tasks.types import JSON, DataSample, InsufficientDataError, Selection

CORRECT_ONCE_PRIORITY = 0.0  # right in some repeats, not all: the most informative tasks
WRONG_ALWAYS_PRIORITY = 1.0

NOT_CALIBRATED = (
    "selection is not difficulty-calibrated: generated tasks chosen round-robin over streams "
    "for stream and family coverage"
)


Tagged = tuple[str, Mapping[str, JSON]]  # a candidate's task id and public metadata


def select_round_robin(
    samples: Sequence[DataSample], target_count: int, stream_order: Sequence[str]
) -> Selection:
    """`target_count` distinct ids, one per stream in turn, else InsufficientDataError."""
    queues, candidates = _queues(_tagged(samples), stream_order, target_count)
    available = sum(len(queue) for queue in queues.values())  # each queue holds <= target
    if available < target_count:
        raise InsufficientDataError(
            f"arithmetic recipe has {available} distinct candidate task(s), needs {target_count}"
        )
    chosen: list[tuple[str, Tagged]] = []
    depth = 0
    while len(chosen) < target_count:
        for stream, queue in queues.items():
            if depth < len(queue) and len(chosen) < target_count:
                chosen.append((stream, queue[depth]))
        depth += 1
    return Selection(tuple(t for _, (t, _) in chosen), _statistics(chosen, candidates))


def _tagged(samples: Sequence[DataSample]) -> Iterable[Tagged]:
    """Each sample's task id and metadata; from the pool's metadata column when `samples` is
    the executor's pool (`task_metadata`), which skips decoding inputs and references."""
    view = getattr(samples, "task_metadata", None)
    if callable(view):
        return view()  # type: ignore[no-any-return]
    return ((sample.task_id, sample.task.metadata) for sample in samples)


def _queues(
    tagged: Iterable[Tagged], stream_order: Sequence[str], depth: int
) -> tuple[dict[str, list[Tagged]], int]:
    """Per stream the `depth` smallest-id distinct candidates, and how many there were.

    One pass keeping at most 2 x `depth` per stream, so a pool on disk is never held in memory
    whole.
    """
    kept: dict[str, dict[str, Mapping[str, JSON]]] = {}
    count = 0
    for task_id, metadata in tagged:
        count += 1
        queue = kept.setdefault(str(metadata.get("stream", "")), {})
        queue.setdefault(task_id, metadata)
        if len(queue) > 2 * depth:
            for dropped in sorted(queue)[depth:]:
                del queue[dropped]
    rank = {name: index for index, name in enumerate(stream_order)}
    order = sorted(kept, key=lambda name: (rank.get(name, len(rank)), name))
    queues = {name: [(t, kept[name][t]) for t in sorted(kept[name])[:depth]] for name in order}
    return queues, count


def _statistics(chosen: list[tuple[str, Tagged]], available: int) -> dict[str, object]:
    """Counts per stream and family, the candidate count, and the not-calibrated note."""
    families = Counter(str(metadata.get("family", "")) for _, (_, metadata) in chosen)
    streams = Counter(stream for stream, _ in chosen)
    return {
        "calibrated": False,
        "note": NOT_CALIBRATED,
        "candidates": available,
        "selected": len(chosen),
        "per_family": dict(sorted(families.items())),
        "per_stream": dict(sorted(streams.items())),
    }


def calibrated_policy(minimum_per_family: int, maximum_per_stream: int) -> SelectionPolicy:
    """Every family's minimum (in `FAMILIES` order; none when 0) and the cap per bucket
    (stream and batch)."""
    minima = {family: minimum_per_family for family in FAMILIES} if minimum_per_family else {}
    return SelectionPolicy(minimum_per_group=minima, maximum_per_bucket=maximum_per_stream)


def bucket(stream: str, batch_index: int) -> str:
    """The selection bucket of a stream's candidates of one batch: `<stream>@<batch>`."""
    return f"{stream}@{batch_index}"


def rank(
    sample: DataSample, scores: Sequence[float | None], seed: int, batch_index: int
) -> RankedCandidate | None:
    """The sample's place by its repeat scores, or None: uncalibrated, incomplete or too easy."""
    if not scores or any(score is None for score in scores):
        return None
    correct = sum(1 for score in scores if score == 1.0)
    if correct == len(scores):
        return None
    family = str(sample.task.metadata.get("family", ""))
    stream = str(sample.task.metadata.get("stream", ""))
    return RankedCandidate(
        task_id=sample.task_id,
        priority=CORRECT_ONCE_PRIORITY if correct else WRONG_ALWAYS_PRIORITY,
        tie_breaker=tie_breaker(seed, sample.task_id),
        group=family,
        bucket=bucket(stream, batch_index),
        metadata={"correct": correct, "repeats": len(scores), "family": family, "stream": stream},
    )


def tie_breaker(seed: int, task_id: str) -> str:
    """A seeded shuffle within a priority level: 16 hex of sha256 of the seed and the id."""
    return hashlib.sha256(f"{seed}\0{task_id}".encode()).hexdigest()[:16]


def finalize(
    selected: RankedSelection, eligible_count: int, target_count: int, minimum_one_pass: int
) -> Selection:
    """The ranked selection as the final one, or InsufficientDataError naming what is short."""
    chosen = selected.selected
    if len(chosen) < target_count:
        raise InsufficientDataError(
            f"calibrated arithmetic selection took {len(chosen)} of {target_count} task(s) "
            f"from {eligible_count} eligible candidate(s)"
        )
    if selected.unmet_minimums:
        short = ", ".join(f"{g} {n}" for g, n in selected.unmet_minimums.items())
        raise InsufficientDataError(
            f"calibrated arithmetic selection is short of family minimums ({short} more "
            f"task(s) needed) with {eligible_count} eligible candidate(s)"
        )
    correct_once = sum(1 for c in chosen if _outcome(c) == "correct_once")
    if correct_once < minimum_one_pass:
        raise InsufficientDataError(
            f"calibrated arithmetic selection has {correct_once} task(s) right in some but "
            f"not all repeats, needs minimum_one_pass {minimum_one_pass} "
            f"({eligible_count} eligible candidate(s))"
        )
    return Selection(selected.task_ids, _calibrated_statistics(chosen, eligible_count))


def _outcome(candidate: RankedCandidate) -> str:
    """`correct_once` (right in some repeats, not all), `wrong_always`, or `other` (by `rank`)."""
    correct, repeats = candidate.metadata.get("correct"), candidate.metadata.get("repeats")
    if not isinstance(correct, int) or not isinstance(repeats, int):
        return "other"
    if 0 < correct < repeats:
        return "correct_once"
    return "wrong_always" if correct == 0 else "other"


def _calibrated_statistics(
    chosen: Sequence[RankedCandidate], eligible_count: int
) -> dict[str, object]:
    """Eligible and selected counts, right-once and never-right counts, per family and stream."""
    outcomes = Counter(_outcome(c) for c in chosen)
    families = Counter(c.group for c in chosen)
    streams = Counter(str(c.metadata.get("stream", "")) for c in chosen)
    return {
        "calibrated": True,
        "eligible": eligible_count,
        "selected": len(chosen),
        "correct_once": outcomes["correct_once"],
        "wrong_always": outcomes["wrong_always"],
        "per_family": dict(sorted(families.items())),
        "per_stream": dict(sorted(streams.items())),
    }
