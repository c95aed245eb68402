"""A bench-local recipe for `bench_tasks.py --part scale`: the arithmetic recipe whose `clean`
first burns a fixed CPU time (`burn_us` microseconds of this thread's CPU clock), standing in
for a recipe whose per-candidate work is expensive. Same tasks, same selection, so its dataset
is the arithmetic recipe's with the same params."""

from __future__ import annotations

import time
from pathlib import Path

from corpus_assets.recipes.arithmetic import ArithmeticRecipe, create_recipe
from corpus_assets.tasks.types import DataSample


class BurningRecipe(ArithmeticRecipe):
    """`ArithmeticRecipe` with a `clean` that costs `burn_us` more CPU microseconds."""

    def __init__(self, burn_us: int, recipe: ArithmeticRecipe) -> None:
        super().__init__(
            recipe.candidate_count,
            recipe.maximum_per_recipe,
            recipe.minimum_per_family,
            recipe.minimum_one_pass,
        )
        self.burn_ns = int(burn_us) * 1000

    def clean(self, sample: DataSample) -> DataSample | None:
        until = time.thread_time_ns() + self.burn_ns
        while time.thread_time_ns() < until:
            pass
        return super().clean(sample)

    def source_files(self) -> tuple[Path, ...]:
        return (*super().source_files(), Path(__file__).resolve())


def create(burn_us: int = 0, **params: object) -> BurningRecipe:
    """The factory: `burn_recipe:create` with `burn_us` and the arithmetic recipe's params
    (checked by its factory)."""
    return BurningRecipe(burn_us, create_recipe(**params))
