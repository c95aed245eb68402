"""`Cleaned.of` builds the pool's texts from their fields: they must be exactly `canonical` of
the whole sample, of its public task, input, metadata and reference, whatever the fields hold,
its keys are those of the task id's and the input's texts, and the whole sample's text and the
sample itself come back from the stored texts; a shard file reads back as the rows it was
written from, and one cut short is not taken for a shard file."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from corpus_assets.tasks.checkpoints import Cleaned, canonical
from corpus_assets.tasks.cleaned import Row, key64, payload_text, sample_of, task_key
from corpus_assets.tasks.files import jsonl_line
from corpus_assets.tasks.shards import BLOCK_ROWS, ShardFile
from corpus_assets.tasks.types import JSON, DataSample, GenerationShard, PublicTask

SAMPLES = [
    ({"problem": "2 + 2?"}, {"family": "sums"}, {"answer": "4"}),
    ({"z": [1, 2.5, None, True], "a": {"y": '"q"', "b": "é ☃ \n\t\\"}}, {}, "plain"),
    ("a bare string input", {"b": 1, "a": [{"d": 0, "c": 1}]}, None),
    ({"emoji": "😀", "control": "\u0001"}, {"k": {"n": {"m": []}}}, {"answer": ["1/2", 0.5]}),
    ({"task_id": "in-input"}, {"a": {"task_id": 1}, "task_id": ',"task_id":'}, {"task_id": 2}),
]


@pytest.mark.parametrize(("task_input", "metadata", "reference"), SAMPLES)
def test_cleaned_texts_are_the_canonical_forms(
    task_input: JSON, metadata: dict[str, JSON], reference: JSON
) -> None:
    sample = DataSample(PublicTask("t-1", task_input, metadata), reference)
    cleaned = Cleaned.of(sample)

    def sha(text: str) -> bytes:
        return hashlib.sha256(text.encode("utf-8")).digest()

    assert cleaned.payload == canonical(sample.to_json())
    assert cleaned.public == canonical(sample.task.to_json())
    assert cleaned.reference == canonical(reference)
    assert cleaned.metadata == canonical(metadata)
    assert (cleaned.payload + "\n").encode("utf-8") == jsonl_line(sample.to_json())
    assert cleaned.input == canonical(task_input)
    assert cleaned.content_sha == sha(cleaned.payload)
    assert cleaned.id_key == task_key("t-1") == key64(sha(canonical("t-1")))
    assert cleaned.input_key == key64(sha(canonical(task_input)))
    assert -(2**63) <= cleaned.id_key < 2**63  # an SQLite integer
    fields = (cleaned.task_id, cleaned.input, cleaned.metadata, cleaned.reference)
    assert payload_text(*fields) == cleaned.payload
    assert sample_of(*fields) == DataSample.from_json(sample.to_json())


def test_a_value_that_is_not_json_fails_as_before() -> None:
    sample = DataSample(PublicTask("t-1", {"x": float("nan")}, {}), None)
    with pytest.raises(ValueError):
        Cleaned.of(sample)
    with pytest.raises(TypeError):
        Cleaned.of(DataSample(PublicTask("t-1", {"x": {1, 2}}, {}), None))


def test_a_lone_surrogate_fails_as_before() -> None:
    with pytest.raises(UnicodeEncodeError):
        Cleaned.of(DataSample(PublicTask("t-1", {"x": "\ud800"}, {}), None))


@pytest.mark.parametrize("task_id", ["t\t1\n", 'a "quoted" id', "é", "😀"])
def test_shard_rows_read_back_as_written(tmp_path: Path, task_id: str) -> None:
    samples = [DataSample(PublicTask(task_id, {"p": "tab\there"}, {"m": "\n"}), {"a": "1"})]
    samples += [DataSample(PublicTask(f"s-{i}", i, {}), i) for i in range(BLOCK_ROWS + 2)]
    rows = [Cleaned.of(s) for s in samples]
    written: list[Cleaned | None] = [rows[0], None, *rows[1:]]  # None: a rejected sample
    shard = ShardFile(tmp_path, 0, 0, GenerationShard(0, len(written)))
    assert shard.write(written) == len(written)
    assert shard.verified_rows() == len(written)
    blocks = list(shard.read())
    assert [b.size for b in blocks] == [BLOCK_ROWS, 4]
    assert [r for b in blocks for r in b.rows()] == [row(r) for r in written]
    for skip in (1, 2, BLOCK_ROWS - 1, BLOCK_ROWS, BLOCK_ROWS + 1, len(written)):
        assert [r for b in shard.read(skip) for r in b.rows()] == [row(r) for r in written[skip:]]
    assert payload_text(*written[0][:4]) == canonical(samples[0].to_json())  # type: ignore[index]


def row(cleaned: Cleaned | None) -> Row | None:
    return None if cleaned is None else tuple(cleaned)  # type: ignore[return-value]


def test_a_shard_file_cut_short_is_not_reused(tmp_path: Path) -> None:
    shard = ShardFile(tmp_path, 0, 0, GenerationShard(0, 2))
    shard.write([Cleaned.of(DataSample(PublicTask("a", 1, {}), 1)), None])
    data = shard.rows_path.read_bytes()
    shard.rows_path.write_bytes(data[:-1])
    assert shard.verified_rows() is None  # the sidecar's digest no longer matches
