"""A cleaned candidate as the pool stores it: its canonical JSON texts and their digests.

Workers encode and hash each cleaned sample (`Cleaned.of`), so the coordinator only looks up
and inserts; `canonical` is the one JSON text of a value, the text of `jsonl_line` without its
newline. The pool keeps a candidate's public task and its reference as two texts; the whole
sample's text (`payload`) is the public task's with the reference put in its sorted place.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from corpus_assets.tasks.types import JSON, DataSample, PublicTask

_CANONICAL = json.JSONEncoder(  # one encoder: json.dumps builds one per call with these options
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)
# what `_CANONICAL.encode` calls for a value that is not a string, without the Python layers
# around it (a third of the cost of a small value): the C encoder with the same options and a
# fresh circular-reference memo per call; None where the C accelerator is missing
_C_ENCODER: Callable[..., Callable[[object, int], Sequence[str]]] | None = getattr(
    json.encoder, "c_make_encoder", None
)
_ENCODE_STRING: Callable[[str], str] = json.encoder.encode_basestring
_sha256 = hashlib.sha256


def canonical(obj: JSON) -> str:
    """The one canonical JSON text of a value (sorted keys, no spaces, UTF-8 unescaped): the
    text of `jsonl_line(obj)` without its newline."""
    if isinstance(obj, str):
        return _ENCODE_STRING(obj)
    return _encoder()(obj)


def _encoder() -> Callable[[JSON], str]:
    """`canonical` for values encoded one after the other: one C encoder serves them all (its
    circular-reference memo is empty again after each value)."""
    if _C_ENCODER is None:
        return _CANONICAL.encode
    encode = _C_ENCODER({}, _CANONICAL.default, _ENCODE_STRING, None, ":", ",", True, False, False)
    return lambda obj: "".join(encode(obj, 0))


def _tail(task_id: Any) -> str:
    """The end of a public task's text: its `task_id` key and value, then the closing brace."""
    return f'"task_id":{canonical(task_id)}}}'


def payload_text(public: str, reference: str) -> str:
    """The whole sample's canonical text from its public task's and its reference's: the keys
    sort as input, metadata, reference, task_id, so the reference goes before the last key (a
    key inside the input or the metadata comes earlier, and the task id's own text holds no
    unescaped quote)."""
    cut = public.rindex(',"task_id":') + 1
    return f'{public[:cut]}"reference":{reference},{public[cut:]}'


def sample_of(public: str, reference: str) -> DataSample:
    """The sample back from its two texts (what `DataSample.from_json` gives for its payload)."""
    task = json.loads(public)
    metadata = task["metadata"]
    return DataSample(
        PublicTask(str(task["task_id"]), task["input"], metadata), json.loads(reference)
    )


class Cleaned(NamedTuple):
    """A cleaned sample as the pool stores it, encoded and hashed where it was cleaned.

    Workers build these, so the coordinator's commit does lookups and inserts only. A duplicate
    task id is told from a clash by `content_sha`; two task ids with one input are found by
    `input_sha` and compared by their reference texts.
    """

    task_id: str
    public: str  # canonical JSON of the public task (`batch-N-public.jsonl`)
    reference: str  # canonical JSON of the reference
    metadata: str  # canonical JSON of the public metadata (what a selection may read alone)
    content_sha: bytes  # sha256 of `payload`
    input_sha: bytes  # sha256 of the canonical JSON of the input

    @property
    def payload(self) -> str:
        """Canonical JSON of the whole sample, reference included (`batch-N-candidates.jsonl`)."""
        return payload_text(self.public, self.reference)

    @classmethod
    def of(cls, sample: DataSample) -> Cleaned:
        """Each field encoded once: the public task and the payload are the canonical texts of
        their fields joined in sorted key order, which is `canonical` of the whole object."""
        task = sample.task
        encode = _encoder()
        task_input, reference = encode(task.input), encode(sample.reference)
        metadata = encode(dict(task.metadata))
        head = f'{{"input":{task_input},"metadata":{metadata},'
        tail = _tail(task.task_id)
        payload = f'{head}"reference":{reference},{tail}'
        return cls(
            task.task_id,
            head + tail,
            reference,
            metadata,
            _sha256(payload.encode("utf-8")).digest(),
            _sha256(task_input.encode("utf-8")).digest(),
        )
