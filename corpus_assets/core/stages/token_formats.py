"""The token file formats of the training frameworks, byte for byte as datatrove 0.10 writes them.

Both take one of our token file pairs (`shard-NNNNN.bin`, `.idx`: little-endian ids, every
document ending with EOS; uint64 cumulative document ends) as it is, and rank NNNNN's files are
the ones datatrove's writer run as rank NNNNN on the same documents writes:

- `megatron` (`MegatronDocumentTokenizer`, read by Megatron-LM's `IndexedDataset`, NeMo,
  GPT-NeoX): `NNNNN_tokens.bin`, the ids (uint16, or int32 when the vocabulary needs 4 bytes:
  the same bytes, ids being below 2**31), and `NNNNN_tokens.idx`: `MMIDIDX\\0\\0`, version 1
  (uint64), the dtype code (uint8: 8 uint16, 4 int32), the sequence count and the document count
  (uint64 each), then each sequence's length (int32), its byte offset in the `.bin` (int64), and
  the document indices 0..n (int64). One sequence per document.
- `nanotron` (`DocumentTokenizer` with `shuffle_documents=False`, read by nanotron's `Nanoset`
  through datatrove's `DatatroveFolderDataset`): `NNNNN_unshuffled.ds`, the ids (uint16 or
  uint32); `NNNNN_unshuffled.ds.index`, the uint64 document ends (our `.idx` exactly); and
  `NNNNN_unshuffled.ds.metadata`: the tokenizer name and token size (`gpt2|2`), the token count,
  and the count with a metric prefix (`119 kT`), on three lines without a final newline.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from corpus_assets.core.errors import DataError

FORMATS = ("megatron", "nanotron")
MEGATRON_HEADER = b"MMIDIDX\x00\x00"
MEGATRON_VERSION = 1
MEGATRON_DTYPE_CODES = {2: 8, 4: 4}  # token size -> Megatron's DType code (uint16, int32)
INT32_MAX = 2**31 - 1

Ends = npt.NDArray[np.uint64]


def file_names(fmt: str, rank: int) -> tuple[str, ...]:
    """The files datatrove's writer makes as `rank` (the tokens file first)."""
    if fmt == "megatron":
        return (f"{rank:05d}_tokens.bin", f"{rank:05d}_tokens.idx")
    stem = f"{rank:05d}_unshuffled.ds"
    return (stem, f"{stem}.index", f"{stem}.metadata")


def megatron_index(ends: Ends, token_size: int) -> Iterator[bytes]:
    """The `.idx` of a Megatron pair whose documents end at `ends` (in tokens), in pieces."""
    count = int(ends.size)
    starts = np.concatenate((np.zeros(1, dtype=np.int64), ends.astype(np.int64)))[:count]
    lengths = ends.astype(np.int64) - starts
    if count and int(lengths.max()) > INT32_MAX:
        raise DataError(
            f"a document of {int(lengths.max())} tokens does not fit Megatron's int32 sequence "
            "length"
        )
    yield MEGATRON_HEADER + struct.pack(
        "<QBQQ", MEGATRON_VERSION, MEGATRON_DTYPE_CODES[token_size], count, count + 1
    )
    yield lengths.astype("<i4").tobytes()
    yield (starts * token_size).astype("<i8").tobytes()
    yield np.arange(count + 1, dtype="<i8").tobytes()


def nanotron_metadata(tokenizer_name: str, token_size: int, tokens: int) -> bytes:
    """The `.ds.metadata` of a nanotron file of `tokens` tokens."""
    lines = [f"{tokenizer_name}|{token_size}", str(tokens), metric(tokens, "T")]
    return "\n".join(lines).encode("utf-8")


def metric(value: int, unit: str) -> str:
    """A count with an SI prefix and three significant digits, as `humanize.metric` (4.x) gives
    it for a count below 10**33: `119 kT`, `1.50 MT`, `0.00 T`."""
    if not 0 <= value < 10**33:
        raise ValueError(f"count {value} is outside 0 .. 10**33")
    exponent = math.floor(math.log10(value)) if value else 0
    old_bucket = exponent // 3 * 3
    scaled: float = value / 10**old_bucket
    digits = max(0, 3 - exponent % 3 - 1)
    if exponent < 30 and round(scaled, digits) >= 10 ** (exponent % 3 + 1):
        exponent += 1
        scaled /= 10 ** (exponent // 3 * 3 - old_bucket)
        digits = max(0, 3 - exponent % 3 - 1)
    prefix = "kMGTPEZYRQ"[exponent // 3 - 1] if exponent >= 3 else ""
    return f"{scaled:.{digits}f} {prefix}{unit}"


def token_size(dtype: str) -> int:
    """Bytes per token of a token build's dtype (`uint16` or `uint32`)."""
    sizes: dict[str, Any] = {"uint16": 2, "uint32": 4}
    if dtype not in sizes:
        raise DataError(f"token dtype {dtype!r} is not uint16 or uint32")
    return int(sizes[dtype])
