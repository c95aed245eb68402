"""A cleaned candidate as the pool stores it: its canonical JSON texts, a digest and two keys.

Workers encode, hash and key each cleaned sample (`Cleaned.of`), so the coordinator only looks
up and inserts; `canonical` is the one JSON text of a value, the text of `jsonl_line` without
its newline. The pool keeps a candidate's input, metadata and reference as three texts; the
public task's text and the whole sample's (`payload`) are those joined in sorted key order.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import struct
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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


def key64(digest: bytes) -> int:
    """A 64-bit lookup key from a sha256 digest (its first 8 bytes, as SQLite's signed integer).
    Keys only find candidates; the texts they point to are compared before anything is decided,
    so two values sharing a key are still told apart."""
    return int.from_bytes(digest[:8], "big", signed=True)


def task_key(task_id: Any) -> int:
    """The pool's lookup key of a task id: `key64` of the sha256 of its canonical text."""
    return key64(_sha256(canonical(task_id).encode("utf-8")).digest())


def public_text(task_id: Any, task_input: str, metadata: str) -> str:
    """The public task's canonical text from its task id and its input's and metadata's texts:
    the keys sort as input, metadata, task_id."""
    return f'{{"input":{task_input},"metadata":{metadata},"task_id":{canonical(task_id)}}}'


def payload_text(task_id: Any, task_input: str, metadata: str, reference: str) -> str:
    """The whole sample's canonical text from its fields' texts: the keys sort as input,
    metadata, reference, task_id."""
    return (
        f'{{"input":{task_input},"metadata":{metadata},"reference":{reference},'
        f'"task_id":{canonical(task_id)}}}'
    )


def sample_of(task_id: str, task_input: str, metadata: str, reference: str) -> DataSample:
    """The sample back from its stored texts (what `DataSample.from_json` gives for its
    payload)."""
    loads = json.loads
    return DataSample(PublicTask(task_id, loads(task_input), loads(metadata)), loads(reference))


class Cleaned(NamedTuple):
    """A cleaned sample as the pool stores it, encoded, hashed and keyed where it was cleaned.

    Workers build these and hand them over as plain tuples in this field order (`row`), so the
    coordinator's commit only looks up and inserts. A duplicate task id is told from a clash by
    `content_sha`; two task ids with one input are found by `input_key` and compared by their
    input and reference texts.
    """

    task_id: str
    input: str  # canonical JSON of the public input
    metadata: str  # canonical JSON of the public metadata (what a selection may read alone)
    reference: str  # canonical JSON of the reference
    content_sha: bytes  # sha256 of `payload`
    id_key: int  # `task_key(task_id)`
    input_key: int  # `key64` of the sha256 of `input`

    @property
    def public(self) -> str:
        """Canonical JSON of the public task (`batch-N-public.jsonl`)."""
        return public_text(self.task_id, self.input, self.metadata)

    @property
    def payload(self) -> str:
        """Canonical JSON of the whole sample, reference included (`batch-N-candidates.jsonl`)."""
        return payload_text(self.task_id, self.input, self.metadata, self.reference)

    @classmethod
    def of(cls, sample: DataSample) -> Cleaned:
        """Each field encoded once: the payload is the canonical texts of the fields joined in
        sorted key order, which is `canonical` of the whole object."""
        task = sample.task
        encode = _encoder()
        task_input, reference = encode(task.input), encode(sample.reference)
        metadata = encode(dict(task.metadata))
        task_id = canonical(task.task_id)
        payload = (
            f'{{"input":{task_input},"metadata":{metadata},"reference":{reference},'
            f'"task_id":{task_id}}}'
        )
        return cls(
            task.task_id,
            task_input,
            metadata,
            reference,
            _sha256(payload.encode("utf-8")).digest(),
            key64(_sha256(task_id.encode("utf-8")).digest()),
            key64(_sha256(task_input.encode("utf-8")).digest()),
        )


Row = tuple[str, str, str, str, bytes, int, int]
"""A `Cleaned` as a plain tuple, in its field order."""


@dataclass(frozen=True, slots=True)
class Block:
    """Consecutive generated samples, cleaned, column by column: what a worker hands to the
    coordinator (pickled, or as one `marshal` value of a shard file) and what the pool admits
    in one step. The coordinator reads the keys and digests as arrays without a Python object
    per candidate, and inserts the texts as they came.

    `kept` has one byte per generated sample: 1 when `clean` kept it, 0 when it rejected it.
    The other fields hold the kept samples' `Cleaned` fields in order: four lists of texts, the
    32-byte content digests concatenated, and the two keys as native int64s.
    """

    kept: bytes
    task_ids: list[str]
    inputs: list[str]
    metadata: list[str]
    references: list[str]
    digests: bytes
    id_keys: bytes
    input_keys: bytes

    @classmethod
    def of(cls, cleaned: Sequence[Cleaned | Row | None]) -> Block:
        kept = [c for c in cleaned if c is not None]
        return cls(
            bytes(c is not None for c in cleaned),
            [c[0] for c in kept],
            [c[1] for c in kept],
            [c[2] for c in kept],
            [c[3] for c in kept],
            b"".join([c[4] for c in kept]),
            _int64s([c[5] for c in kept]),
            _int64s([c[6] for c in kept]),
        )

    @property
    def size(self) -> int:
        """Generated samples, rejected ones included."""
        return len(self.kept)

    @property
    def count(self) -> int:
        """Kept samples."""
        return len(self.task_ids)

    def rows(self) -> list[Row | None]:
        """Each generated sample's `Row`, or None where it was rejected."""
        ids, inputs, keys = self.task_ids, self.input_keys, self.id_keys
        kept = iter(range(self.count))
        out: list[Row | None] = []
        for flag in self.kept:
            if not flag:
                out.append(None)
                continue
            i = next(kept)
            out.append(
                (
                    ids[i],
                    self.inputs[i],
                    self.metadata[i],
                    self.references[i],
                    self.digests[32 * i : 32 * i + 32],
                    int.from_bytes(keys[8 * i : 8 * i + 8], sys.byteorder, signed=True),
                    int.from_bytes(inputs[8 * i : 8 * i + 8], sys.byteorder, signed=True),
                )
            )
        return out

    def after(self, skip: int) -> Block:
        """The samples after the first `skip`."""
        if not skip:
            return self
        drop = sum(self.kept[:skip])
        return Block(
            self.kept[skip:],
            self.task_ids[drop:],
            self.inputs[drop:],
            self.metadata[drop:],
            self.references[drop:],
            self.digests[32 * drop :],
            self.id_keys[8 * drop :],
            self.input_keys[8 * drop :],
        )

    def to_marshal(self) -> bytes:
        return marshal.dumps(tuple(getattr(self, f) for f in self.__slots__))

    @classmethod
    def from_marshal(cls, data: bytes) -> Block:
        """A block back from `to_marshal`; ValueError when `data` is not one."""
        fields = marshal.loads(data)
        if not (isinstance(fields, tuple) and len(fields) == len(cls.__slots__)):
            raise ValueError("a shard file block that is not a block of cleaned samples")
        block = cls(*fields)
        count = block.count
        if not (
            sum(block.kept) == count
            and len(block.digests) == 32 * count
            and len(block.id_keys) == len(block.input_keys) == 8 * count
        ):
            raise ValueError("a shard file block whose columns do not line up")
        return block


def _int64s(values: list[int]) -> bytes:
    return struct.pack(f"={len(values)}q", *values)
