"""`Cleaned.of` builds the pool's texts from their fields: they must be exactly `canonical` of
the whole sample, of its public task and of its reference, whatever the fields hold, and the
whole sample's text and the sample itself come back from the two stored texts; a shard file
line reads back as the row it was written from."""

from __future__ import annotations

import hashlib

import pytest

from corpus_assets.tasks.checkpoints import Cleaned, canonical
from corpus_assets.tasks.cleaned import payload_text, sample_of
from corpus_assets.tasks.files import jsonl_line
from corpus_assets.tasks.shards import parse_row, row_line
from corpus_assets.tasks.types import JSON, DataSample, PublicTask

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
    assert cleaned.content_sha == sha(cleaned.payload)
    assert cleaned.input_sha == sha(canonical(task_input))
    assert payload_text(cleaned.public, cleaned.reference) == cleaned.payload
    assert sample_of(cleaned.public, cleaned.reference) == DataSample.from_json(sample.to_json())


def test_a_value_that_is_not_json_fails_as_before() -> None:
    sample = DataSample(PublicTask("t-1", {"x": float("nan")}, {}), None)
    with pytest.raises(ValueError):
        Cleaned.of(sample)
    with pytest.raises(TypeError):
        Cleaned.of(DataSample(PublicTask("t-1", {"x": {1, 2}}, {}), None))


def test_a_lone_surrogate_fails_as_before() -> None:
    with pytest.raises(UnicodeEncodeError):
        Cleaned.of(DataSample(PublicTask("t-1", {"x": "\ud800"}, {}), None))


@pytest.mark.parametrize("task_id", ["t\t1\n", 'a "quoted" id', "é", 7])
def test_shard_rows_read_back_as_written(task_id: object) -> None:
    sample = DataSample(PublicTask(task_id, {"p": "tab\there"}, {"m": "\n"}), {"a": "1"})  # type: ignore[arg-type]
    row = Cleaned.of(sample)
    line = row_line(row)
    assert line.count(b"\n") == 1 and line.endswith(b"\n")
    assert parse_row(line) == row
    assert payload_text(row.public, row.reference) == canonical(sample.to_json())
    assert parse_row(row_line(None)) is None
