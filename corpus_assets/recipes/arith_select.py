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
    queues = _queues(samples, stream_order)
    available = sum(len(queue) for queue in queues.values())
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
    return Selection(tuple(s.task_id for _, s in chosen), _statistics(chosen, available))


def _queues(
    samples: Sequence[DataSample], stream_order: Sequence[str]
) -> dict[str, list[DataSample]]:
    """Distinct samples per stream, streams in `stream_order` then others by name, ids sorted."""
    by_id: dict[str, DataSample] = {}
    for sample in samples:
        by_id.setdefault(sample.task_id, sample)
    grouped: dict[str, list[DataSample]] = {}
    for sample in by_id.values():
        grouped.setdefault(str(sample.task.metadata.get("stream", "")), []).append(sample)
    rank = {name: index for index, name in enumerate(stream_order)}
    order = sorted(grouped, key=lambda name: (rank.get(name, len(rank)), name))
    return {name: sorted(grouped[name], key=lambda s: s.task_id) for name in order}


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
