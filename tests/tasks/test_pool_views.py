"""The pool views give `select` what a list of the samples gives: the candidates in pool order,
and `task_metadata` their task ids and metadata alone, so the arithmetic recipe's selection
from the database equals its selection from the same samples in memory; the `IN (...)` lookups
behind the views and admission answer every matching row once, whatever the number of values."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from corpus_assets.recipes.arithmetic import create_recipe
from corpus_assets.tasks.admission import lookup
from corpus_assets.tasks.checkpoints import Block, Checkpoints, Cleaned
from corpus_assets.tasks.types import DataSample, GenerateContext, PublicTask


def _pooled(tmp_path: Path, samples: list[DataSample]) -> Checkpoints:
    ckpt = Checkpoints(tmp_path / "checkpoints.sqlite3")
    ckpt.commit_chunk(0, len(samples), Block.of([Cleaned.of(s) for s in samples]))
    return ckpt


def test_task_metadata_is_the_samples_ids_and_metadata(tmp_path: Path) -> None:
    samples = [
        DataSample(PublicTask("b", {"x": 1}, {"stream": "s", "n": [1, {"k": None}]}), "r"),
        DataSample(PublicTask("a", "text", {}), {"answer": "1"}),
        DataSample(PublicTask('c\t"', {"task_id": 3}, {"task_id": "c"}), None),
    ]
    ckpt = _pooled(tmp_path, samples)
    try:
        pool = ckpt.pool()
        assert list(pool) == samples
        assert list(pool.task_metadata()) == [(s.task_id, dict(s.task.metadata)) for s in samples]
    finally:
        ckpt.close()


def test_arithmetic_selection_from_the_pool_equals_the_selection_from_a_list(
    tmp_path: Path,
) -> None:
    recipe = create_recipe(candidate_count=600)
    context = GenerateContext(seed=3, batch_index=0, target_count=40, purpose="harness")
    cleaned = [recipe.clean(s) for s in recipe.generate(context)]
    distinct = list({s.task_id: s for s in cleaned if s is not None}.values())
    ckpt = _pooled(tmp_path, distinct)
    try:
        from_pool = recipe.select(ckpt.pool(), ckpt.scores(), context)
        from_list = recipe.select(list(ckpt.pool()), {}, context)
    finally:
        ckpt.close()
    assert from_pool == from_list
    assert len(from_pool.task_ids) == 40


@pytest.mark.parametrize("count", [0, 1, 2, 3, 255, 256, 257, 499, 500, 501, 1000])
def test_lookups_padded_to_a_few_sizes_answer_each_row_once(tmp_path: Path, count: int) -> None:
    db = sqlite3.connect(tmp_path / "lookup.sqlite3")
    db.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)")
    db.executemany("INSERT INTO t VALUES (?, ?)", ((f"k{i}", i) for i in range(0, 2000, 2)))
    wanted = [f"k{i}" for i in range(count)] + ["k0"]  # a repeated value, odd ones missing
    rows = sorted(lookup(db, "k, v FROM t", "k", wanted))
    assert rows == sorted({("k0", 0)} | {(f"k{i}", i) for i in range(0, count, 2)})
    db.close()
