"""A scripted recipe for executor tests: batches, rejections and failures given as params.

`batches` lists, per batch index, the samples `generate` yields (`{"id", "input", "answer"}`
plus optional `metadata`); `reject` names ids `clean` turns into None; `need` is how many
pooled candidates `select` wants before it picks the first `target_count` in pool order.
`fail` makes `clean` raise `kind` (for the id `on`, else any) while the file `counter` has
fewer than `times` lines (one line is appended per raise; `sleep` seconds first), so the test
can count attempts across processes; `score_fail` does the same in `score`; `slow` is a sleep
per `clean` call (to kill a job mid-batch); `append_to` is a file `select` appends a line to
(a declared input that changes while the job runs).

`make_sharded` adds the generation-shard hooks (logging `shard <batch> <start>`), and
`make_ranked` the ranking hooks: `priority` and `group` come from the samples' metadata, the
policy from the `policy` param (`minimum_per_group`, `maximum_per_bucket`, `calibrated_only`).
"""

from __future__ import annotations

import builtins
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from corpus_assets.tasks.ranking import RankedCandidate, RankedSelection, SelectionPolicy
from corpus_assets.tasks.types import (
    JSON,
    DataSample,
    GenerateContext,
    GenerationShard,
    InsufficientDataError,
    PublicTask,
    Selection,
)


def make(**params: Any) -> ScriptedRecipe:
    return ScriptedRecipe(**params)


def make_sharded(**params: Any) -> ShardedRecipe:
    return ShardedRecipe(**params)


def make_ranked(policy: Mapping[str, Any] | None = None, **params: Any) -> RankedRecipe:
    return RankedRecipe(policy or {}, **params)


def sample(task_id: str, text: str, answer: str, **metadata: JSON) -> dict[str, Any]:
    """One scripted sample as the `batches` param writes it."""
    return {"id": task_id, "input": {"text": text}, "answer": answer, "metadata": metadata}


def _append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def _lines(path: str) -> int:
    try:
        return len(Path(path).read_text().splitlines())
    except FileNotFoundError:
        return 0


def _maybe_fail(fail: Mapping[str, Any] | None, task_id: str) -> None:
    """Raise `fail["kind"]` for `task_id` while `fail["counter"]` has < `fail["times"]` lines."""
    if not fail or fail.get("on", task_id) != task_id:
        return
    if _lines(fail["counter"]) < fail["times"]:
        time.sleep(fail.get("sleep", 0.0))
        _append(fail["counter"], task_id)
        raise getattr(builtins, fail["kind"])(f"scripted {fail['kind']}")


class ScriptedRecipe:
    def __init__(
        self,
        batches: Sequence[Sequence[Mapping[str, Any]]] = (),
        reject: Sequence[str] = (),
        need: int | None = None,
        fail: Mapping[str, Any] | None = None,
        log: str | None = None,
        select_override: Mapping[str, Any] | None = None,
        score_fail: Mapping[str, Any] | None = None,
        slow: float = 0.0,
        append_to: str | None = None,
    ) -> None:
        self.append_to = append_to
        self.score_fail = score_fail
        self.slow = slow
        self.batches = batches
        self.reject = set(reject)
        self.need = need
        self.fail = fail
        self.log = log
        self.select_override = select_override

    def generate(self, context: GenerateContext) -> Iterator[DataSample]:
        if self.log:
            _append(self.log, f"generate {context.batch_index}")
        if context.batch_index >= len(self.batches):
            return
        for spec in self.batches[context.batch_index]:
            task = PublicTask(spec["id"], spec["input"], dict(spec.get("metadata") or {}))
            yield DataSample(task, {"answer": spec["answer"]})

    def clean(self, sample: DataSample) -> DataSample | None:
        if self.log:
            _append(self.log, f"clean {sample.task_id}")
        _maybe_fail(self.fail, sample.task_id)
        time.sleep(self.slow)
        return None if sample.task_id in self.reject else sample

    def score(self, sample: DataSample, response: JSON) -> float:
        _maybe_fail(self.score_fail, sample.task_id)
        return 1.0 if response == sample.reference["answer"] else 0.0

    def select(
        self,
        samples: Sequence[DataSample],
        scores: Mapping[str, Sequence[float | None]],
        context: GenerateContext,
    ) -> Selection:
        if self.append_to:
            _append(self.append_to, "appended while the job ran")
        if self.select_override is not None:
            return Selection(tuple(self.select_override["task_ids"]))
        need = self.need if self.need is not None else context.target_count
        if len(samples) < need:
            raise InsufficientDataError(f"have {len(samples)} candidates, need {need}")
        chosen = tuple(s.task_id for s in samples[: context.target_count])
        return Selection(chosen, {"pool_type": type(samples).__name__, "scores": len(scores)})

    def training_row(self, sample: DataSample) -> dict[str, JSON]:
        return {"task_id": sample.task_id, "prompt": sample.task.input["text"]}

    def source_files(self) -> tuple[Path, ...]:
        return (Path(__file__).resolve(),)


class ShardedRecipe(ScriptedRecipe):
    """The scripted recipe, generating each batch as shards of the `batches` list (or as the
    `plan` param's [start, stop] ranges)."""

    def __init__(self, plan: Sequence[Sequence[int]] | None = None, **params: Any) -> None:
        super().__init__(**params)
        self.plan = plan

    def generation_shards(self, context: GenerateContext, shard_size: int) -> Iterator[Any]:
        if self.plan is not None:
            yield from (GenerationShard(start, stop) for start, stop in self.plan)
            return
        total = (
            len(self.batches[context.batch_index]) if context.batch_index < len(self.batches) else 0
        )
        for start in range(0, total, shard_size):
            yield GenerationShard(start, min(start + shard_size, total))

    def generate_shard(
        self, context: GenerateContext, shard: GenerationShard
    ) -> Iterator[DataSample]:
        if self.log:
            _append(self.log, f"shard {context.batch_index} {shard.start}")
        for spec in self.batches[context.batch_index][shard.start : shard.stop]:
            task = PublicTask(spec["id"], spec["input"], dict(spec.get("metadata") or {}))
            yield DataSample(task, {"answer": spec["answer"]})


class RankedRecipe(ScriptedRecipe):
    """The scripted recipe with ranking hooks: rank by metadata, the policy from params."""

    def __init__(self, policy: Mapping[str, Any], **params: Any) -> None:
        super().__init__(**params)
        self.policy = policy

    def selection_policy(
        self, context: GenerateContext, calibrated: bool
    ) -> SelectionPolicy | None:
        if self.policy.get("calibrated_only") and not calibrated:
            return None
        return SelectionPolicy(
            dict(self.policy.get("minimum_per_group", {})), self.policy.get("maximum_per_bucket")
        )

    def rank(
        self, sample: DataSample, scores: Sequence[float | None], context: GenerateContext
    ) -> RankedCandidate | None:
        if self.log:
            _append(self.log, f"rank {sample.task_id}")
        meta = sample.task.metadata
        if meta.get("ineligible") or any(s is None for s in scores):
            return None
        priority = float(meta.get("priority", 0.0)) - sum(s or 0.0 for s in scores)
        return RankedCandidate(
            sample.task_id,
            priority,
            group=str(meta.get("group", "")),
            bucket=str(meta.get("bucket", "")),
            metadata={"batch": context.batch_index},
        )

    def finalize_selection(
        self, selected: RankedSelection, eligible_count: int, context: GenerateContext
    ) -> Selection:
        if len(selected.selected) < context.target_count or selected.unmet_minimums:
            raise InsufficientDataError(
                f"{len(selected.selected)} ranked, {eligible_count} eligible, "
                f"unmet {dict(selected.unmet_minimums)}"
            )
        return Selection(selected.task_ids, {"eligible": eligible_count})
