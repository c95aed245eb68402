"""A recipe for live calibration tests: sums whose prompt tells the test server how to answer.

`make(batches=[[mode, ...], ...])`: batch b's task i is `b{b}-{i:02d}`, its input the string
`"b0-03: 103 + 7 = ? [mode]"` (`tests/support/openai_server.py` reads the sum and the mode),
its reference the sum. `chat=True` gives the input as a message list instead. `make_prompted`
keeps the numbers in a mapping and builds the messages in its `prompt(task)` method;
`make_unprompted` keeps the mapping without that method. `score` is
1.0 for the exact sum; `select` takes the first `target_count` retained tasks in pool order.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from corpus_assets.tasks.types import (
    JSON,
    DataSample,
    GenerateContext,
    InsufficientDataError,
    PublicTask,
    Selection,
)

SYSTEM = "Answer with the number only."


def make(batches: Sequence[Sequence[str]] = (), chat: bool = False) -> SumRecipe:
    return SumRecipe(batches, chat)


def make_prompted(batches: Sequence[Sequence[str]] = ()) -> PromptedRecipe:
    return PromptedRecipe(batches, False)


def make_unprompted(batches: Sequence[Sequence[str]] = ()) -> MappingRecipe:
    return MappingRecipe(batches, False)


class SumRecipe:
    def __init__(self, batches: Sequence[Sequence[str]], chat: bool) -> None:
        self.batches = batches
        self.chat = chat

    def task_input(self, text: str, a: int, b: int, mode: str) -> JSON:
        if self.chat:
            return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]
        return text

    def generate(self, context: GenerateContext) -> Iterator[DataSample]:
        batch = context.batch_index
        if batch >= len(self.batches):
            return
        for i, mode in enumerate(self.batches[batch]):
            task_id, a, b = f"b{batch}-{i:02d}", 100 * batch + i, 7
            text = f"{task_id}: {a} + {b} = ? [{mode}]"
            task = PublicTask(task_id, self.task_input(text, a, b, mode), {"mode": mode})
            yield DataSample(task, {"answer": str(a + b)})

    def clean(self, sample: DataSample) -> DataSample | None:
        return sample

    def score(self, sample: DataSample, response: JSON) -> float:
        return 1.0 if response == sample.reference["answer"] else 0.0

    def select(
        self,
        samples: Sequence[DataSample],
        scores: Mapping[str, Sequence[float | None]],
        context: GenerateContext,
    ) -> Selection:
        if len(samples) < context.target_count:
            raise InsufficientDataError(f"have {len(samples)}, need {context.target_count}")
        return Selection(tuple(s.task_id for s in samples[: context.target_count]))

    def training_row(self, sample: DataSample) -> dict[str, JSON]:
        return {"task_id": sample.task_id, "input": sample.task.input}


class MappingRecipe(SumRecipe):
    """Inputs that are mappings: no chat messages without a `prompt` method."""

    def task_input(self, text: str, a: int, b: int, mode: str) -> JSON:
        return {"id": text.split(":")[0], "a": a, "b": b, "mode": mode}


class PromptedRecipe(MappingRecipe):
    def prompt(self, task: PublicTask) -> JSON:
        value: Any = task.input
        text = f"{value['id']} asks: {value['a']} + {value['b']} = ? [{value['mode']}]"
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]
