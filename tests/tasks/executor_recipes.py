"""A scripted recipe for executor tests: batches, rejections and failures given as params.

`batches` lists, per batch index, the samples `generate` yields (`{"id", "input", "answer"}`
plus optional `metadata`); `reject` names ids `clean` turns into None; `need` is how many
pooled candidates `select` wants before it picks the first `target_count` in pool order.
`fail` makes `clean` raise `kind` (for the id `on`, else any) while the file `counter` has
fewer than `times` lines (one line is appended per raise), so the test can count attempts
across processes.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from corpus_assets.tasks.types import (
    JSON,
    DataSample,
    GenerateContext,
    InsufficientDataError,
    PublicTask,
    Selection,
)


def make(**params: Any) -> ScriptedRecipe:
    return ScriptedRecipe(**params)


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


class ScriptedRecipe:
    def __init__(
        self,
        batches: Sequence[Sequence[Mapping[str, Any]]] = (),
        reject: Sequence[str] = (),
        need: int | None = None,
        fail: Mapping[str, Any] | None = None,
        log: str | None = None,
        select_override: Mapping[str, Any] | None = None,
    ) -> None:
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
        failing = self.fail and self.fail.get("on", sample.task_id) == sample.task_id
        if failing and _lines(self.fail["counter"]) < self.fail["times"]:
            _append(self.fail["counter"], sample.task_id)
            raise getattr(builtins, self.fail["kind"])(f"scripted {self.fail['kind']}")
        return None if sample.task_id in self.reject else sample

    def score(self, sample: DataSample, response: JSON) -> float:
        return 1.0 if response == sample.reference["answer"] else 0.0

    def select(
        self,
        samples: Sequence[DataSample],
        scores: Mapping[str, Sequence[float | None]],
        context: GenerateContext,
    ) -> Selection:
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
