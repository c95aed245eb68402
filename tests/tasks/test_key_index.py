"""The coordinator's in-memory task-id keys answer what a dictionary of every pooled key would,
whatever the order and sizes of the chunks added; a reopened database rebuilds them from the
stored keys, and a chunk group rolled back takes its keys out again."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corpus_assets.tasks.admission import insert
from corpus_assets.tasks.checkpoints import Block, Checkpoints, Cleaned
from corpus_assets.tasks.key_index import KeyIndex
from corpus_assets.tasks.types import DataSample, PublicTask

KEYS = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@settings(max_examples=200, deadline=None)
@given(
    chunks=st.lists(
        st.lists(st.tuples(st.sampled_from([-(2**63), -1, 0, 5, 2**63 - 1]) | KEYS, KEYS)),
        max_size=12,
    ),
    probes=st.lists(KEYS | st.sampled_from([-(2**63), -1, 0, 5, 2**63 - 1]), max_size=20),
)
def test_the_index_answers_as_a_dictionary_of_every_key(
    chunks: list[list[tuple[int, int]]], probes: list[int]
) -> None:
    index, reference = KeyIndex(), dict[int, list[tuple[int, int]]]()  # key: (seq, digest)s
    seq = 0
    for chunk in chunks:
        keys = np.array([k for k, _ in chunk], np.int64)
        digests = np.array([d for _, d in chunk], np.int64)
        index.add(keys, digests, np.arange(seq, seq + len(chunk), dtype=np.int64))
        for key, digest in chunk:
            reference.setdefault(key, []).append((seq, digest))
            seq += 1
    assert len(index) == seq
    asked = probes + [k for chunk in chunks for k, _ in chunk]
    found, digests = index.probe(np.array(asked, np.int64))
    for key, hit, digest in zip(asked, found.tolist(), digests.tolist(), strict=True):
        pooled = reference.get(key, [])
        assert hit == bool(pooled)
        assert digest in ([d for _, d in pooled] if pooled else [0])
        assert index.positions(key) == [s for s, _ in pooled]


def sample(task_id: str, reference: str = "r") -> Cleaned:
    return Cleaned.of(DataSample(PublicTask(task_id, {"q": task_id}, {}), reference))


def pooled(ckpt: Checkpoints) -> list[str]:
    return [r[0] for r in ckpt.db.execute("SELECT task_id FROM candidates ORDER BY seq")]


def test_a_reopened_pool_still_finds_its_duplicates_and_conflicts(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    ckpt = Checkpoints(path)
    ckpt.commit_chunk(0, 3, Block.of([sample("a"), sample("b"), None]))
    ckpt.commit_chunk(0, 5, Block.of([sample("c"), sample("a")]))
    ckpt.close()
    again = Checkpoints(path)
    counts = again.commit_chunk(0, 8, Block.of([sample("c"), sample("d"), sample("b")]))
    assert counts == {"rejected": 0, "duplicates": 2, "excluded": 0, "retained": 1}
    assert pooled(again) == ["a", "b", "c", "d"]
    assert again.samples_by_id(["d", "a"])[1].task_id == "a"
    with pytest.raises(Exception, match="cleaned twice with different references"):
        again.commit_chunk(0, 9, Block.of([sample("b", "other")]))
    assert again.batch_range(0) == (0, 4)


def test_a_chunk_group_rolled_back_takes_its_keys_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails after the rows went in (a full disk, say) rolls the open group back;
    the keys of its chunks must go too, or the same chunks would count as duplicates of rows
    the database no longer has."""
    ckpt = Checkpoints(tmp_path / "c.sqlite3")
    ckpt.commit_chunk(0, 1, Block.of([sample("a")]))
    ckpt.commit_chunk(0, 2, Block.of([sample("b")]), durable=False)  # open group

    def insert_then_fail(db: sqlite3.Connection, *args: object) -> None:
        insert(db, *args)  # type: ignore[arg-type]
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr("corpus_assets.tasks.checkpoints.insert", insert_then_fail)
    with pytest.raises(sqlite3.OperationalError):
        ckpt.commit_chunk(0, 3, Block.of([sample("c")]))
    monkeypatch.undo()
    assert pooled(ckpt) == ["a"]  # the group (b, then c) rolled back
    counts = ckpt.commit_chunk(0, 3, Block.of([sample("b"), sample("c"), sample("a")]))
    assert counts == {"rejected": 0, "duplicates": 1, "excluded": 0, "retained": 2}
    assert pooled(ckpt) == ["a", "b", "c"]
