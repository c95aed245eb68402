"""The recipe protocol: public tasks, samples with private references, selections, contexts.

A recipe never sees the executor and the model side never sees a reference: `PublicTask` is what
may leave the executor, `DataSample` adds the private `reference` and stays inside it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

Purpose = Literal["harness", "model", "joint"]
PURPOSES: tuple[Purpose, ...] = ("harness", "model", "joint")
JSON = Any  # a value that json.dumps accepts: dict, list, str, int, float, bool, None
Row = dict[str, JSON]  # one JSON object: a line of a snapshot's JSONL files
ProjectedRow = tuple[Row, Row, Row]  # a selected task's public, reference and training rows


class InsufficientDataError(Exception):
    """Raised by `Recipe.select` when the candidates cannot fill the target yet: another batch."""


@dataclass(frozen=True)
class PublicTask:
    """A task as the model side may see it: a stable id, the domain input, public metadata."""

    task_id: str
    input: JSON
    metadata: Mapping[str, JSON] = field(default_factory=dict)

    def to_json(self) -> dict[str, JSON]:
        """The task as one JSON object (`public.jsonl` rows)."""
        return {"task_id": self.task_id, "input": self.input, "metadata": dict(self.metadata)}


@dataclass(frozen=True)
class DataSample:
    """A candidate task: its public part plus the private reference used to score responses."""

    task: PublicTask
    reference: JSON

    @property
    def task_id(self) -> str:
        """The public task's id."""
        return self.task.task_id

    def to_json(self) -> dict[str, JSON]:
        """The whole sample as one JSON object (checkpoints, `batch-N-candidates.jsonl`)."""
        return {**self.task.to_json(), "reference": self.reference}

    @classmethod
    def from_json(cls, doc: Mapping[str, JSON]) -> DataSample:
        """The sample `to_json` wrote."""
        task = PublicTask(str(doc["task_id"]), doc["input"], dict(doc.get("metadata") or {}))
        return cls(task, doc["reference"])


@dataclass(frozen=True)
class Selection:
    """What `Recipe.select` chose: exactly `target_count` distinct task ids, with statistics."""

    task_ids: tuple[str, ...]
    statistics: Mapping[str, JSON] = field(default_factory=dict)


@dataclass(frozen=True)
class GenerationShard:
    """Positions `start ..< stop` of a batch's `generate` stream, generated on their own."""

    start: int
    stop: int


@dataclass(frozen=True)
class GenerateContext:
    """What `generate` and `select` are told: seed, batch, target, purpose, input files."""

    seed: int
    batch_index: int
    target_count: int
    purpose: Purpose
    inputs: tuple[Path, ...] = ()


@runtime_checkable
class Recipe(Protocol):
    """Domain code the executor drives; built by a `module:callable` factory from `params`."""

    def generate(self, context: GenerateContext) -> Iterable[DataSample]:
        """A bounded batch of candidate samples for batch `context.batch_index`."""
        ...

    def clean(self, sample: DataSample) -> DataSample | None:
        """The cleaned sample, or None to reject it."""
        ...

    def score(self, sample: DataSample, response: JSON) -> float:
        """A finite score in [0, 1] of `response` against the sample's private reference."""
        ...

    def select(
        self,
        samples: Sequence[DataSample],
        scores: Mapping[str, Sequence[float | None]],
        context: GenerateContext,
    ) -> Selection:
        """Exactly `context.target_count` distinct task ids, or raise InsufficientDataError."""
        ...

    def training_row(self, sample: DataSample) -> dict[str, JSON]:
        """One JSON training row for a selected sample (`train.jsonl`)."""
        ...


# Optional hooks, found with getattr; a recipe without them uses the methods above.
#
#   generation_shards(context, shard_size) -> Iterable[GenerationShard]
#       contiguous ranges from 0 that together are the batch; each at most `shard_size` long.
#   generate_shard(context, shard) -> Iterable[DataSample]
#       at most `stop - start` samples: positions start..stop-1 of `generate(context)`.
#   selection_policy(context, calibrated) -> SelectionPolicy | None
#       None: select with `select` as without the hooks.
#   rank(sample, scores, context) -> RankedCandidate | None
#       the candidate's place in the global order, or None when it is not eligible; `scores`
#       holds one score per repeat (None where the attempt failed), empty without calibration,
#       and `context` is the context of the candidate's own batch.
#   finalize_selection(selected, eligible_count, context) -> Selection
#       the final ids from a `RankedSelection`, or InsufficientDataError for another batch.


def check_score(value: object) -> float:
    """`value` as a score: a finite number in [0, 1], else ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"a score must be a number in [0, 1], got {type(value).__name__}")
    score = float(value)
    if not math.isfinite(score) or not 0.0 <= score <= 1.0:
        raise ValueError(f"a score must be a finite number in [0, 1], got {value!r}")
    return score
