"""Tokenizers of the tokenize stage: `bytes` or a Hugging Face `tokenizers` file, and the EOS id.

`resolve_tokenizer` runs once in the stage's parent (config and hub problems surface before any
work); `load_encoder` runs in each worker from the resolved `TokenizerInfo`. An encoder turns a
batch of texts (an Arrow string array) into one flat token array with EOS after every document,
plus each document's length in tokens (EOS included).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from corpus_assets.core.config import LoadedConfig, TokenizerSpec
from corpus_assets.core.errors import ConfigError, TransientError
from corpus_assets.core.store.digests import file_sha256

BYTES_ID = "bytes"
BYTES_EOS = 256
UINT16_VOCAB = 65_536
# The tokenizer's own end-of-text token, tried in this order when the config names none.
EOS_CANDIDATES = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|eos|>")
DTYPES: dict[str, np.dtype[Any]] = {"uint16": np.dtype("<u2"), "uint32": np.dtype("<u4")}
IDX_DTYPE = np.dtype("<u8")  # a token file's document end offsets

Tokens = npt.NDArray[np.unsignedinteger[Any]]
Lengths = npt.NDArray[np.int64]


@dataclass(frozen=True)
class TokenizerInfo:
    """A resolved tokenizer: what the manifest records and what a worker needs to load it."""

    id: str
    file: str | None
    sha256: str | None
    vocab_size: int
    eos_id: int

    @property
    def dtype(self) -> str:
        """`uint16` when every id (EOS included) fits, else `uint32`."""
        return "uint16" if self.vocab_size <= UINT16_VOCAB else "uint32"

    def identity(self) -> dict[str, Any]:
        """What decides the token files' bytes (recorded in manifests and resume markers)."""
        return {
            "id": self.id,
            "sha256": self.sha256,
            "vocab_size": self.vocab_size,
            "eos_id": self.eos_id,
            "dtype": self.dtype,
        }


class Encoder(Protocol):
    """Texts to token ids; `encode` is `finish(start(texts))`.

    `start` does the heavy part and may run on another thread (the Rust tokenizer releases the
    GIL); `finish` makes the flat ids (each text's tokens, then EOS) and each document's length
    with EOS.
    """

    def start(self, texts: Any) -> Any: ...

    def finish(self, started: Any) -> tuple[Tokens, Lengths]: ...

    def encode(self, texts: Any) -> tuple[Tokens, Lengths]: ...


def resolve_tokenizer(cfg: LoadedConfig) -> TokenizerInfo:
    """Find, load and check the config's tokenizer; settle its EOS id and vocabulary size."""
    spec = cfg.model.tokenizer
    if spec.id == BYTES_ID:
        return TokenizerInfo(BYTES_ID, None, None, BYTES_EOS + 1, BYTES_EOS)
    file = cfg.resolve(spec.path) if spec.path is not None else hub_file(spec.id)
    if not file.is_file():
        what = (
            f"{file} is a folder, not a tokenizer.json"
            if file.is_dir()
            else f"file not found: {file}"
        )
        raise ConfigError(f"tokenizer {spec.id!r}: {what} (tokenizer.path = {spec.path!r})")
    sha = file_sha256(file)
    tok = load_hf(file, spec.id, sha)
    eos = _eos_id(tok, spec)
    ids = tok.get_vocab(with_added_tokens=True).values()
    vocab = max(tok.get_vocab_size(with_added_tokens=True), max(ids, default=-1) + 1, eos + 1)
    return TokenizerInfo(spec.id, str(file), sha, vocab, eos)


def hub_file(repo_id: str) -> Path:
    """`tokenizer.json` of a Hugging Face Hub repo (the file `Tokenizer.from_pretrained` loads).

    A malformed id, a repo without the file, or offline mode (`HF_HUB_OFFLINE`) without a cached
    copy are config errors: the same environment fails the same way on every retry. A hub that
    cannot be reached while online is transient.
    """
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        with _quiet_hub():
            return Path(hf_hub_download(repo_id, "tokenizer.json"))
    except HFValidationError as exc:
        raise ConfigError(
            f"tokenizer {repo_id!r} is not a Hugging Face Hub repo id ({_one_line(exc)}); "
            "use 'bytes', a hub id like 'openai-community/gpt2', or set tokenizer.path"
        ) from None
    except LocalEntryNotFoundError as exc:
        if constants.is_offline_mode():
            raise ConfigError(
                f"tokenizer {repo_id!r}: not in the local Hugging Face cache "
                f"({constants.HF_HUB_CACHE}) and HF_HUB_OFFLINE is set; download it once "
                "online, or set tokenizer.path to a local tokenizer.json"
            ) from None
        raise _unreachable(repo_id, exc) from None
    except (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError) as exc:
        raise ConfigError(
            f"tokenizer {repo_id!r}: the Hugging Face Hub has no tokenizer.json for it "
            f"({type(exc).__name__}); set tokenizer.path to a local tokenizer.json"
        ) from None
    except Exception as exc:
        raise _unreachable(repo_id, exc) from None


@contextmanager
def _quiet_hub() -> Iterator[None]:
    """The hub client's own retry warnings off: a failed lookup is our one error line."""
    logger = logging.getLogger("huggingface_hub")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _unreachable(repo_id: str, exc: Exception) -> TransientError:
    cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
    return TransientError(
        f"tokenizer {repo_id!r}: cannot reach the Hugging Face Hub "
        f"({type(cause).__name__}: {_one_line(cause)[:200]}); retry later, "
        "or set tokenizer.path to a local tokenizer.json (relative to the config file)"
    )


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def load_hf(file: Path, tokenizer_id: str, sha256: str | None = None) -> Any:
    """A `tokenizers.Tokenizer` from a `tokenizer.json`; a broken file is a config error.

    With `sha256`, the last one loaded is kept, so the stage loads it once per process.
    """
    from tokenizers import Tokenizer

    key = (str(file), sha256)
    if sha256 is not None and key in _loaded:
        return _loaded[key]
    try:
        tok = Tokenizer.from_file(str(file))
    except Exception as exc:
        raise ConfigError(
            f"tokenizer {tokenizer_id!r}: {file} is not a valid tokenizer.json: {_one_line(exc)}"
        ) from None
    if sha256 is not None:
        _loaded.clear()
        _loaded[key] = tok
    return tok


_loaded: dict[tuple[str, str | None], Any] = {}


def _eos_id(tok: Any, spec: TokenizerSpec) -> int:
    if spec.eos_id is not None:
        return spec.eos_id
    if spec.eos_token is not None:
        found = tok.token_to_id(spec.eos_token)
        if found is None:
            raise ConfigError(
                f"tokenizer {spec.id!r}: eos_token {spec.eos_token!r} is not in its vocabulary"
            )
        return int(found)
    for token in EOS_CANDIDATES:
        found = tok.token_to_id(token)
        if found is not None:
            return int(found)
    special = sorted(str(t.content) for t in tok.get_added_tokens_decoder().values() if t.special)
    raise ConfigError(
        f"tokenizer {spec.id!r}: no end-of-text token found (tried {', '.join(EOS_CANDIDATES)}); "
        f"set tokenizer.eos_token or tokenizer.eos_id (special tokens: {', '.join(special) or '-'})"
    )


def load_encoder(info: TokenizerInfo) -> Encoder:
    """The encoder a worker uses for `info`."""
    if info.id == BYTES_ID:
        return BytesEncoder()
    assert info.file is not None
    tok = load_hf(Path(info.file), info.id, info.sha256)
    return HFEncoder(tok, info.eos_id, DTYPES[info.dtype])


def plain_strings(texts: Any) -> Any:
    """`texts` as an Arrow `string` or `large_string` array (other string types are cast)."""
    import pyarrow as pa

    if pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type):
        return texts
    return texts.cast(pa.large_string())


def _offsets(texts: Any) -> npt.NDArray[np.int64]:
    """Absolute offsets of the rows of a plain string array into its data buffer (rows + 1)."""
    import pyarrow as pa

    if len(texts) == 0:
        return np.zeros(1, dtype=np.int64)
    width = np.int64 if pa.types.is_large_string(texts.type) else np.int32
    raw = np.frombuffer(texts.buffers()[1], dtype=width)[
        texts.offset : texts.offset + len(texts) + 1
    ]
    return raw.astype(np.int64)


def text_sizes(texts: Any) -> npt.NDArray[np.int64]:
    """UTF-8 size of every row of an Arrow string array (without pandas or a copy of the text)."""
    return np.diff(_offsets(plain_strings(texts)))


def utf8_view(texts: Any) -> tuple[npt.NDArray[np.uint8], list[int]]:
    """The UTF-8 bytes under an Arrow string array (no copy) and its row offsets from 0."""
    texts = plain_strings(texts)
    offsets = _offsets(texts)
    start, end = int(offsets[0]), int(offsets[-1])
    if end == start:
        return _NO_BYTES, (offsets - start).tolist()
    data = np.frombuffer(texts.buffers()[2], dtype=np.uint8)[start:end]
    return data, (offsets - start).tolist()


_NO_BYTES = np.zeros(0, dtype=np.uint8)


class BytesEncoder:
    """UTF-8 bytes as token ids 0-255, EOS 256."""

    def start(self, texts: Any) -> Any:
        return texts

    def encode(self, texts: Any) -> tuple[Tokens, Lengths]:
        return self.finish(texts)

    def finish(self, texts: Any) -> tuple[Tokens, Lengths]:
        data, offsets = utf8_view(texts)
        n = len(offsets) - 1
        out = np.empty(len(data) + n, dtype=DTYPES["uint16"])
        for k in range(n):
            start, end = offsets[k], offsets[k + 1]
            out[start + k : end + k] = data[start:end]
            out[end + k] = BYTES_EOS
        ends = np.asarray(offsets[1:], dtype=np.int64)
        lengths = ends - np.asarray(offsets[:-1], dtype=np.int64) + 1
        return out, lengths


class HFEncoder:
    """A `tokenizers.Tokenizer`: ids exactly as `Tokenizer.encode(text).ids`, then EOS."""

    def __init__(self, tok: Any, eos_id: int, dtype: np.dtype[Any]) -> None:
        self.tok = tok
        self.eos = (eos_id,)
        self.dtype = dtype
        # encode_batch_fast (tokenizers >= 0.21) skips offsets; the ids are the same.
        self._batch = getattr(tok, "encode_batch_fast", tok.encode_batch)

    def start(self, texts: Any) -> Any:
        return self._batch(texts.to_pylist())

    def encode(self, texts: Any) -> tuple[Tokens, Lengths]:
        return self.finish(self.start(texts))

    def finish(self, encodings: Any) -> tuple[Tokens, Lengths]:
        lengths = np.fromiter((len(e) + 1 for e in encodings), np.int64, count=len(encodings))
        ids = chain.from_iterable(chain(e.ids, self.eos) for e in encodings)
        out = np.fromiter(ids, dtype=self.dtype, count=int(lengths.sum()))
        return out, lengths
