"""Selection without calibration: round-robin over streams, by task id within a stream."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from corpus_assets.tasks.types import DataSample, InsufficientDataError, Selection

NOT_CALIBRATED = (
    "selection is not difficulty-calibrated: generated tasks chosen round-robin over streams "
    "for stream and family coverage"
)


def select_round_robin(
    samples: Sequence[DataSample], target_count: int, stream_order: Sequence[str]
) -> Selection:
    """`target_count` distinct ids, one per stream in turn, else InsufficientDataError."""
    queues, candidates = _queues(samples, stream_order, target_count)
    available = sum(len(queue) for queue in queues.values())  # each queue holds <= target
    if available < target_count:
        raise InsufficientDataError(
            f"arithmetic recipe has {available} distinct candidate task(s), needs {target_count}"
        )
    chosen: list[tuple[str, DataSample]] = []
    depth = 0
    while len(chosen) < target_count:
        for stream, queue in queues.items():
            if depth < len(queue) and len(chosen) < target_count:
                chosen.append((stream, queue[depth]))
        depth += 1
    return Selection(tuple(s.task_id for _, s in chosen), _statistics(chosen, candidates))


def _queues(
    samples: Sequence[DataSample], stream_order: Sequence[str], depth: int
) -> tuple[dict[str, list[DataSample]], int]:
    """Per stream the `depth` smallest-id distinct samples, and how many samples there were.

    One pass over `samples` keeping at most 2 x `depth` per stream, so a pool on disk is never
    held in memory whole.
    """
    kept: dict[str, dict[str, DataSample]] = {}
    count = 0
    for sample in samples:
        count += 1
        queue = kept.setdefault(str(sample.task.metadata.get("stream", "")), {})
        queue.setdefault(sample.task_id, sample)
        if len(queue) > 2 * depth:
            for task_id in sorted(queue)[depth:]:
                del queue[task_id]
    rank = {name: index for index, name in enumerate(stream_order)}
    order = sorted(kept, key=lambda name: (rank.get(name, len(rank)), name))
    queues = {name: [kept[name][t] for t in sorted(kept[name])[:depth]] for name in order}
    return queues, count


def _statistics(chosen: list[tuple[str, DataSample]], available: int) -> dict[str, object]:
    """Counts per stream and family, the candidate count, and the not-calibrated note."""
    families = Counter(str(s.task.metadata.get("family", "")) for _, s in chosen)
    streams = Counter(stream for stream, _ in chosen)
    return {
        "calibrated": False,
        "note": NOT_CALIBRATED,
        "candidates": available,
        "selected": len(chosen),
        "per_family": dict(sorted(families.items())),
        "per_stream": dict(sorted(streams.items())),
    }
