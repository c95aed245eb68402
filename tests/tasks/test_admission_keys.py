"""The pool finds candidates by 64-bit keys of the task id and of the input, and decides by the
texts: two task ids (or two inputs) that share a key are still two, and a public input met
again with another reference fails when its batch is finished, naming the first such pair in
pool order, across chunks and batches."""

from __future__ import annotations

from pathlib import Path

import pytest

from corpus_assets.core.errors import DataError
from corpus_assets.tasks import cleaned as cleaned_module
from corpus_assets.tasks.checkpoints import Checkpoints, Cleaned
from corpus_assets.tasks.cleaned import Block, Row
from corpus_assets.tasks.types import DataSample, PublicTask


@pytest.fixture
def one_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every task id and every input gets the same key, as if sha256 prefixes collided."""
    monkeypatch.setattr(cleaned_module, "key64", lambda digest: 7)


def cleaned(task_id: str, task_input: str, reference: str) -> Row:
    return tuple(Cleaned.of(DataSample(PublicTask(task_id, task_input, {}), reference)))  # type: ignore[return-value]


def pooled(ckpt: Checkpoints) -> list[str]:
    return [r[0] for r in ckpt.db.execute("SELECT task_id FROM candidates ORDER BY seq")]


@pytest.mark.usefixtures("one_key")
def test_task_ids_sharing_a_key_are_two_tasks_and_duplicates_still_found(tmp_path: Path) -> None:
    ckpt = Checkpoints(tmp_path / "c.sqlite3")
    a, b, c = cleaned("a", "A", "1"), cleaned("b", "B", "2"), cleaned("c", "C", "3")
    assert a[5] == b[5] == c[5] == a[6] == b[6]
    assert ckpt.commit_chunk(0, 2, Block.of([a, b])) == {
        "rejected": 0,
        "duplicates": 0,
        "excluded": 0,
        "retained": 2,
    }
    counts = ckpt.commit_chunk(0, 6, Block.of([c, b, None, a]))
    assert counts == {"rejected": 1, "duplicates": 2, "excluded": 0, "retained": 1}
    assert pooled(ckpt) == ["a", "b", "c"]
    assert ckpt.first_unknown(["a", "b", "c", "d"]) == "d"
    assert [s.task_id for s in ckpt.samples_by_id(["c", "b", "a"])] == ["c", "b", "a"]
    ckpt.finish_batch(0, 6, False)  # three inputs under one key: no conflict
    assert ckpt.batch(0).done


@pytest.mark.usefixtures("one_key")
def test_a_task_id_with_other_content_fails_behind_a_key_it_shares(tmp_path: Path) -> None:
    ckpt = Checkpoints(tmp_path / "c.sqlite3")
    ckpt.commit_chunk(0, 2, Block.of([cleaned("a", "A", "1"), cleaned("b", "B", "2")]))
    with pytest.raises(DataError, match="conflicting references: task 'b' was cleaned twice"):
        ckpt.commit_chunk(0, 3, Block.of([cleaned("b", "B", "9")]))
    with pytest.raises(DataError, match="'a' names two different cleaned samples"):
        ckpt.commit_chunk(0, 3, Block.of([cleaned("a", "other", "1")]))
    assert pooled(ckpt) == ["a", "b"]  # the failed chunks left nothing


@pytest.mark.parametrize("where", ["one chunk", "two chunks", "two batches"])
def test_an_input_with_another_reference_fails_its_batch_naming_the_first_pair(
    tmp_path: Path, where: str
) -> None:
    ckpt = Checkpoints(tmp_path / "c.sqlite3")
    rows = [cleaned("p", "same", "1"), cleaned("q", "other", "5"), cleaned("r", "same", "1")]
    later = [cleaned("s", "same", "2"), cleaned("t", "other", "6"), cleaned("u", "same", "3")]
    batch = 0
    if where == "one chunk":
        ckpt.commit_chunk(0, 6, Block.of(rows + later))
    else:
        ckpt.commit_chunk(0, 3, Block.of(rows))
        if where == "two batches":
            ckpt.finish_batch(0, 3, False)  # same input, same reference: no conflict
            batch = 1
        ckpt.commit_chunk(batch, 3, Block.of(later))
    assert pooled(ckpt) == ["p", "q", "r", "s", "t", "u"]
    with pytest.raises(DataError) as err:
        ckpt.finish_batch(batch, 3, False)
    assert str(err.value) == (
        "conflicting references: the same public input has two different references, in "
        "task 'p' and task 's'"
    )
    assert not ckpt.batch(batch).done  # a resume meets the same error
