"""The example recipe: exact-answer arithmetic word problems, generated without a model.

Sixteen streams (eight families, two sentence structures each). Every sample is built from its
own generator, seeded through sha256 from the job seed, the batch index, the stream name and the
sample's index in its stream, so any process builds the same batch and any contiguous range of
it (a `GenerationShard`) is built alone, without the samples before it. A batch interleaves the
streams round by round; every batch has `candidate_count` samples, whatever was selected before.

Selection is round-robin over streams (`select`) without calibration; with it, the ranking
hooks (`selection_policy`, `rank`, `finalize_selection`, in `arith_select`) prefer tasks the
model got right in some repeats but not all, with `minimum_per_family` (on by default),
`minimum_one_pass`, and `maximum_per_recipe`, the selection's cap per stream and batch.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from fractions import Fraction
from pathlib import Path

from corpus_assets.core.errors import ConfigError
from corpus_assets.recipes import arith_answers, arith_families, arith_select
from corpus_assets.recipes.arith_answers import boxed_matches, format_answer, parse_answer
from corpus_assets.recipes.arith_families import STREAMS, Stream
from corpus_assets.recipes.arith_select import select_round_robin
from corpus_assets.tasks.ranking import RankedCandidate, RankedSelection, SelectionPolicy
from corpus_assets.tasks.types import (
    JSON,
    DataSample,
    GenerateContext,
    GenerationShard,
    PublicTask,
    Selection,
)

DEFAULTS: dict[str, int] = {
    "candidate_count": 64,
    "maximum_per_recipe": 1000,
    "minimum_per_family": 1,  # family coverage: every family in a calibrated selection
    "minimum_one_pass": 0,
}
AT_LEAST_ZERO = frozenset({"minimum_per_family", "minimum_one_pass"})
MAX_ABS_ANSWER = Fraction(10**7)
MAX_DENOMINATOR = 10**4
INSTRUCTION = "Give the final answer within \\boxed{}."
_SPACES = re.compile(r"\s+")


class RecipeParamError(ConfigError, ValueError):
    """A bad recipe parameter: unknown, or not an integer in its range (exit 64)."""


def create_recipe(**params: object) -> ArithmeticRecipe:
    """The factory the job config names: `corpus_assets.recipes.arithmetic:create_recipe`."""
    unknown = sorted(set(params) - set(DEFAULTS))
    if unknown:
        raise RecipeParamError(
            f"unknown arithmetic recipe param(s) {', '.join(unknown)}; allowed: "
            f"{', '.join(sorted(DEFAULTS))}"
        )
    values = {
        name: _integer(name, params.get(name, default), 0 if name in AT_LEAST_ZERO else 1)
        for name, default in DEFAULTS.items()
    }
    return ArithmeticRecipe(**values)


def _integer(name: str, value: object, minimum: int) -> int:
    """`value` as an integer >= `minimum`, else RecipeParamError naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise RecipeParamError(
            f"arithmetic recipe param {name} must be an integer >= {minimum}, got {value!r}"
        )
    return value


def task_id_for(public_input: JSON) -> str:
    """`arith-` + the first 16 hex of sha256 of the canonical JSON of the public input."""
    canonical = json.dumps(public_input, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "arith-" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def sample_rng(seed: int, batch_index: int, stream: str, index_in_stream: int) -> random.Random:
    """One sample's own generator, from sha256 (never Python's salted hash())."""
    key = f"arith\0{seed}\0{batch_index}\0{stream}\0{index_in_stream}"
    digest = hashlib.sha256(key.encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))


def interleaved(quotas: Sequence[int], start: int, stop: int) -> Iterator[tuple[int, int]]:
    """(stream index, round) of positions `start ..< stop` of the round-robin over `quotas`.

    Round r visits, in order, the streams whose quota exceeds r; a stream's sample in round r
    is its r-th. The first position is located without walking the earlier ones.
    """
    round_index, offset = _locate(quotas, start)
    position = start
    while position < stop:
        active = [index for index, quota in enumerate(quotas) if quota > round_index]
        if not active:
            return
        for stream_index in active[offset : offset + stop - position]:
            yield stream_index, round_index
        position += len(active) - offset
        round_index, offset = round_index + 1, 0


def _locate(quotas: Sequence[int], position: int) -> tuple[int, int]:
    """The round holding `position` and its offset in that round; past the end, the last round.

    Between two consecutive distinct quotas the number of streams per round is constant, so
    the search steps over at most one span per distinct quota.
    """
    round_start = 0
    for level in sorted({quota for quota in quotas if quota > 0}):
        active = sum(1 for quota in quotas if quota >= level)
        span = (level - round_start) * active
        if position < span:
            return round_start + position // active, position % active
        position -= span
        round_start = level
    return round_start, 0


class ArithmeticRecipe:
    """Arithmetic word problems with exact references; round-robin or calibrated selection."""

    def __init__(
        self,
        candidate_count: int,
        maximum_per_recipe: int,
        minimum_per_family: int,
        minimum_one_pass: int,
    ) -> None:
        self.candidate_count = candidate_count
        self.maximum_per_recipe = maximum_per_recipe
        self.minimum_per_family = minimum_per_family
        self.minimum_one_pass = minimum_one_pass

    def quota(self, stream_index: int) -> int:
        """How many samples stream `stream_index` yields in every batch."""
        per_batch = self.candidate_count // len(STREAMS)
        return per_batch + (1 if stream_index < self.candidate_count % len(STREAMS) else 0)

    def quotas(self) -> list[int]:
        """Every stream's quota in a batch, in `STREAMS` order."""
        return [self.quota(index) for index in range(len(STREAMS))]

    def generate(self, context: GenerateContext) -> Iterator[DataSample]:
        """`candidate_count` samples spread over the streams, interleaved: every shard in order."""
        return self.generate_shard(context, GenerationShard(0, self.candidate_count))

    def generation_shards(
        self, context: GenerateContext, shard_size: int
    ) -> Iterator[GenerationShard]:
        """Contiguous ranges of at most `shard_size` positions that together are the batch."""
        if isinstance(shard_size, bool) or not isinstance(shard_size, int) or shard_size < 1:
            raise ValueError(f"shard_size must be an integer >= 1, got {shard_size!r}")
        total = self.candidate_count
        for start in range(0, total, shard_size):
            yield GenerationShard(start, min(start + shard_size, total))

    def generate_shard(
        self, context: GenerateContext, shard: GenerationShard
    ) -> Iterator[DataSample]:
        """Positions `shard.start ..< shard.stop` of `generate(context)`, built on their own."""
        if not 0 <= shard.start <= shard.stop:
            raise ValueError(f"a shard needs 0 <= start <= stop, got {shard}")
        quotas = self.quotas()
        for stream_index, index_in_stream in interleaved(quotas, shard.start, shard.stop):
            stream = STREAMS[stream_index]
            rng = sample_rng(context.seed, context.batch_index, stream.name, index_in_stream)
            yield make_sample(stream, stream.build(rng))

    def clean(self, sample: DataSample) -> DataSample | None:
        """The sample with its text's whitespace collapsed, or None when degenerate."""
        raw = sample.task.input.get("problem") if isinstance(sample.task.input, dict) else None
        problem = _SPACES.sub(" ", raw).strip() if isinstance(raw, str) else ""
        answer = _reference_value(sample.reference)
        if not problem or answer is None:
            return None
        if abs(answer) > MAX_ABS_ANSWER or answer.denominator > MAX_DENOMINATOR:
            return None
        public_input = {**sample.task.input, "problem": problem}
        task = PublicTask(task_id_for(public_input), public_input, dict(sample.task.metadata))
        return DataSample(task, {"answer": format_answer(answer)})

    def score(self, sample: DataSample, response: JSON) -> float:
        """1.0 when the last `\\boxed{}` in `response` equals the reference exactly, else 0.0."""
        expected = _reference_value(sample.reference)
        if expected is None:
            return 0.0
        percent = sample.task.metadata.get("family") == "percentages"
        return 1.0 if boxed_matches(response, expected, allow_percent=percent) else 0.0

    def select(
        self,
        samples: Sequence[DataSample],
        scores: Mapping[str, Sequence[float | None]],
        context: GenerateContext,
    ) -> Selection:
        """`target_count` ids round-robin over the streams (not difficulty-calibrated)."""
        return select_round_robin(samples, context.target_count, [s.name for s in STREAMS])

    def selection_policy(
        self, context: GenerateContext, calibrated: bool
    ) -> SelectionPolicy | None:
        """None without calibration (`select` decides); else family minima and the cap per
        stream and batch."""
        if not calibrated:
            return None
        return arith_select.calibrated_policy(self.minimum_per_family, self.maximum_per_recipe)

    def rank(
        self, sample: DataSample, scores: Sequence[float | None], context: GenerateContext
    ) -> RankedCandidate | None:
        """Right in some repeats first, never right next; None when not eligible."""
        return arith_select.rank(sample, scores, context.seed, context.batch_index)

    def finalize_selection(
        self, selected: RankedSelection, eligible_count: int, context: GenerateContext
    ) -> Selection:
        """The calibrated ids in the order taken, or InsufficientDataError for another batch."""
        return arith_select.finalize(
            selected, eligible_count, context.target_count, self.minimum_one_pass
        )

    def training_row(self, sample: DataSample) -> dict[str, JSON]:
        """`task_id`, one user message asking for a boxed answer, and the boxed reference."""
        return {
            "task_id": sample.task_id,
            "messages": self.prompt(sample.task),
            "answer": f"\\boxed{{{sample.reference['answer']}}}",
        }

    def prompt(self, task: PublicTask) -> list[JSON]:
        """The chat messages a live calibrator sends: one user message asking for a boxed
        answer, from the public task alone (the training row's messages)."""
        return [{"role": "user", "content": f"{task.input['problem']}\n\n{INSTRUCTION}"}]

    def source_files(self) -> tuple[Path, ...]:
        """This module and its helpers: the code that decides every sample and the selection."""
        modules = (__file__, arith_answers.__file__, arith_families.__file__, arith_select.__file__)
        return tuple(Path(str(name)).resolve() for name in modules)


def make_sample(stream: Stream, problem: arith_families.Problem) -> DataSample:
    """A sample from a generated problem: public text and operands, private exact answer."""
    public_input: dict[str, JSON] = {"problem": problem.text, "values": problem.values}
    metadata = {"family": stream.family, "structure": stream.structure, "stream": stream.name}
    task = PublicTask(task_id_for(public_input), public_input, metadata)
    return DataSample(task, {"answer": format_answer(problem.answer)})


def _reference_value(reference: JSON) -> Fraction | None:
    """The exact value of a reference `{"answer": "..."}`, or None when it is not one."""
    if not isinstance(reference, dict) or not isinstance(reference.get("answer"), str):
        return None
    return parse_answer(reference["answer"])
