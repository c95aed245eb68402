"""A cleaned candidate as the pool stores it: its canonical JSON texts and their digests.

Workers encode and hash each cleaned sample (`Cleaned.of`), so the coordinator only looks up
and inserts; `canonical` is the one JSON text of a value, the text of `jsonl_line` without its
newline.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import NamedTuple

from corpus_assets.tasks.types import JSON, DataSample

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


def canonical(obj: JSON) -> str:
    """The one canonical JSON text of a value (sorted keys, no spaces, UTF-8 unescaped): the
    text of `jsonl_line(obj)` without its newline."""
    if isinstance(obj, str):
        return _ENCODE_STRING(obj)
    if _C_ENCODER is None:
        return _CANONICAL.encode(obj)
    encode = _C_ENCODER({}, _CANONICAL.default, _ENCODE_STRING, None, ":", ",", True, False, False)
    return "".join(encode(obj, 0))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Cleaned(NamedTuple):
    """A cleaned sample as the pool stores it, encoded and hashed where it was cleaned.

    Workers build these, so the coordinator's commit does lookups and inserts only.
    """

    task_id: str
    payload: str  # canonical JSON of the whole sample (reference included)
    public: str  # canonical JSON of the public task (`batch-N-public.jsonl`)
    content_sha: str
    input_sha: str
    reference_sha: str

    @classmethod
    def of(cls, sample: DataSample) -> Cleaned:
        """Each field encoded once: the payload and the public task are the canonical texts of
        their fields joined in sorted key order, which is `canonical` of the whole object."""
        task = sample.task
        task_input, reference = canonical(task.input), canonical(sample.reference)
        head = f'{{"input":{task_input},"metadata":{canonical(dict(task.metadata))},'
        tail = f'"task_id":{canonical(task.task_id)}}}'
        payload = f'{head}"reference":{reference},{tail}'
        return cls(
            task.task_id, payload, head + tail, _sha(payload), _sha(task_input), _sha(reference)
        )
