"""A test recipe for the executor's fault tests: the arithmetic recipe, counted and pausable.

`create_recipe(**params)` takes the arithmetic recipe's params (plus `extra_source`, a file its
`source_files()` also declares) and wraps it. The controls live in the environment, not in the
params, so a faulted job and an uninterrupted one share one config and publish the same bytes;
spawned process workers inherit the environment:

FAULT_LOG    a file that gets one line per call: `generate <batch>`, `clean <task_id>`,
             `project <task_id>`, and `paused-pid <pid>` then `pause <kind>` when a call starts
             to wait (O_APPEND, one write per line, so lines from several processes never mix)
FAULT_PAUSE  `clean:N` or `project:N` (every such call once the log holds N of them),
             `generate:B` (the generation of batch B): the call waits there
FAULT_GATE   a file whose existence ends every pause (without it a pause lasts PAUSE_LIMIT_S)
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from corpus_assets.recipes.arithmetic import ArithmeticRecipe
from corpus_assets.recipes.arithmetic import create_recipe as create_arithmetic
from corpus_assets.tasks.types import JSON, DataSample, GenerateContext, Selection

PAUSE_LIMIT_S = 600.0
POLL_S = 0.02


def create_recipe(*, extra_source: str | None = None, **params: object) -> CountingRecipe:
    """The factory a test config names: `fault_recipes:create_recipe`."""
    return CountingRecipe(create_arithmetic(**params), extra_source)


def record(line: str) -> None:
    """Append `line` to FAULT_LOG (if set) in one write."""
    log = os.environ.get("FAULT_LOG")
    if not log:
        return
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


def logged(kind: str) -> int:
    """How many `kind ...` lines FAULT_LOG holds."""
    log = os.environ.get("FAULT_LOG")
    if not log or not os.path.exists(log):
        return 0
    with open(log, encoding="utf-8") as fh:
        return sum(1 for line in fh if line.startswith(f"{kind} "))


def maybe_pause(kind: str, batch: int | None = None) -> None:
    """Wait for FAULT_GATE when FAULT_PAUSE names this point (see the module docstring)."""
    spec = os.environ.get("FAULT_PAUSE", "")
    want, _, number = spec.partition(":")
    if want != kind or not number:
        return
    if kind == "generate":
        if batch != int(number):
            return
    elif logged(kind) < int(number):
        return
    gate = os.environ.get("FAULT_GATE")
    if gate and os.path.exists(gate):
        return
    record(f"paused-pid {os.getpid()}")
    record(f"pause {kind}")
    deadline = time.monotonic() + PAUSE_LIMIT_S
    while time.monotonic() < deadline and not (gate and os.path.exists(gate)):
        time.sleep(POLL_S)


class CountingRecipe:
    """The arithmetic recipe, logging (and maybe pausing) every generate, clean and projection."""

    def __init__(self, inner: ArithmeticRecipe, extra_source: str | None) -> None:
        self.inner = inner
        self.extra_source = extra_source

    def generate(self, context: GenerateContext) -> Iterator[DataSample]:
        """The arithmetic batch, after logging `generate <batch>`."""
        record(f"generate {context.batch_index}")
        maybe_pause("generate", context.batch_index)
        yield from self.inner.generate(context)

    def clean(self, sample: DataSample) -> DataSample | None:
        """The arithmetic clean, after logging `clean <task_id>`."""
        record(f"clean {sample.task_id}")
        maybe_pause("clean")
        return self.inner.clean(sample)

    def score(self, sample: DataSample, response: JSON) -> float:
        """The arithmetic score."""
        return self.inner.score(sample, response)

    def select(
        self,
        samples: Sequence[DataSample],
        scores: Mapping[str, Sequence[float | None]],
        context: GenerateContext,
    ) -> Selection:
        """The arithmetic selection."""
        return self.inner.select(samples, scores, context)

    def training_row(self, sample: DataSample) -> dict[str, JSON]:
        """The arithmetic training row, after logging `project <task_id>`."""
        record(f"project {sample.task_id}")
        maybe_pause("project")
        return self.inner.training_row(sample)

    def source_files(self) -> tuple[Path, ...]:
        """The arithmetic sources, this module and `extra_source` when given."""
        extra = (Path(self.extra_source),) if self.extra_source else ()
        return (*self.inner.source_files(), Path(__file__).resolve(), *extra)
