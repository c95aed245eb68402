"""An example recipe that reads a corpus build: fill-in-the-blank (cloze) tasks from its text.

The job config names the build in `inputs: [{corpus: <partition key>}]`; the executor verifies
the build's shards and passes their Parquet files in `context.inputs`. Each sentence of at
least `min_words` words gives one candidate: one word of at least `min_word_length` letters,
chosen by sha256 of (seed, document id, sentence number), is replaced by `____`; the word is the
private reference. Batch `b` is candidates `b * candidate_count` onwards of that stream, so any
worker rebuilds the same batch. Selection takes the `target_count` smallest task ids.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from itertools import islice
from pathlib import Path

import pyarrow.parquet as pq

from corpus_assets.core.errors import ConfigError
from corpus_assets.tasks.types import (
    JSON,
    DataSample,
    GenerateContext,
    InsufficientDataError,
    PublicTask,
    Selection,
)

DEFAULTS = {"candidate_count": 64, "min_words": 6, "min_word_length": 5}
BLANK = "____"
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[A-Za-z]+")


def create_recipe(**params: object) -> ClozeRecipe:
    """The factory a job config names: `corpus_assets.recipes.cloze:create_recipe`."""
    unknown = sorted(set(params) - set(DEFAULTS))
    if unknown:
        raise ConfigError(
            f"unknown cloze recipe param(s) {', '.join(unknown)}; allowed: {', '.join(DEFAULTS)}"
        )
    values = {k: params.get(k, v) for k, v in DEFAULTS.items()}
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"cloze recipe param {name} must be an integer >= 1, got {value!r}")
    return ClozeRecipe(**values)  # type: ignore[arg-type]


def task_id_for(public_input: JSON) -> str:
    """`cloze-` + 16 hex of sha256 of the canonical JSON of the public input."""
    text = json.dumps(public_input, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "cloze-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class ClozeRecipe:
    """Cloze tasks over the documents of the corpus builds in `context.inputs`."""

    def __init__(self, candidate_count: int, min_words: int, min_word_length: int) -> None:
        self.candidate_count = candidate_count
        self.min_words = min_words
        self.min_word_length = min_word_length

    def generate(self, context: GenerateContext) -> Iterator[DataSample]:
        """Candidates `batch * candidate_count` onwards, `candidate_count` of them."""
        start = context.batch_index * self.candidate_count
        yield from islice(self._stream(context), start, start + self.candidate_count)

    def _stream(self, context: GenerateContext) -> Iterator[DataSample]:
        for path in context.inputs:
            if path.suffix != ".parquet":
                continue
            table = pq.read_table(path, columns=["id", "text", "source", "license"])
            for row in table.to_pylist():
                for number, sentence in enumerate(_SENTENCE.split(row["text"])):
                    sample = self._sample(context.seed, row, number, sentence)
                    if sample is not None:
                        yield sample

    def _sample(
        self, seed: int, row: Mapping[str, str], number: int, sentence: str
    ) -> DataSample | None:
        words = sentence.split()
        if len(words) < self.min_words:
            return None
        choices = [i for i, w in enumerate(words) if len(_letters(w)) >= self.min_word_length]
        if not choices:
            return None
        digest = hashlib.sha256(f"cloze\0{seed}\0{row['id']}\0{number}".encode()).digest()
        index = choices[int.from_bytes(digest[:8], "big") % len(choices)]
        answer = _letters(words[index])
        words[index] = words[index].replace(answer, BLANK, 1)
        public_input = {"text": " ".join(words), "document": row["id"]}
        metadata = {"source": row["source"], "license": row["license"]}
        task = PublicTask(task_id_for(public_input), public_input, metadata)
        return DataSample(task, {"answer": answer})

    def clean(self, sample: DataSample) -> DataSample | None:
        """Drop a task whose answer still shows elsewhere in the sentence (too easy)."""
        text = sample.task.input["text"] if isinstance(sample.task.input, dict) else ""
        answer = sample.reference["answer"] if isinstance(sample.reference, dict) else ""
        if answer.lower() in (w.lower() for w in _WORD.findall(text)):
            return None
        return sample

    def score(self, sample: DataSample, response: JSON) -> float:
        """1.0 when the response's last word is the hidden word (case-insensitive)."""
        if not isinstance(response, str):
            return 0.0
        words = _WORD.findall(response)
        return 1.0 if words and words[-1].lower() == sample.reference["answer"].lower() else 0.0

    def select(
        self,
        samples: Sequence[DataSample],
        scores: Mapping[str, Sequence[float | None]],
        context: GenerateContext,
    ) -> Selection:
        """The `target_count` smallest task ids, with the sources they came from."""
        ids = sorted(s.task_id for s in samples)
        if len(ids) < context.target_count:
            raise InsufficientDataError(
                f"cloze recipe has {len(ids)} candidate(s), needs {context.target_count}"
            )
        chosen = tuple(ids[: context.target_count])
        return Selection(chosen, {"candidates": len(ids), "selected": len(chosen)})

    def training_row(self, sample: DataSample) -> dict[str, JSON]:
        """`task_id`, one user message with the sentence, and the hidden word."""
        content = f"Fill in the blank ({BLANK}) with one word:\n\n{sample.task.input['text']}"
        return {
            "task_id": sample.task_id,
            "messages": [{"role": "user", "content": content}],
            "answer": sample.reference["answer"],
        }

    def source_files(self) -> tuple[Path, ...]:
        return (Path(__file__).resolve(),)


def _letters(word: str) -> str:
    """The first run of letters in `word` (`"story,"` -> `"story"`)."""
    found = _WORD.search(word)
    return found.group(0) if found else ""
