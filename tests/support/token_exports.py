"""datatrove 0.10's token writers run on a build's shards, and one reader of each documented
format (Megatron's `MMIDIDX` index, datatrove's `.ds` + `.ds.index`), for the export tests."""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

MEGATRON_DTYPES = {8: np.dtype("<u2"), 4: np.dtype("<i4")}


def bytes_tokenizer(path: Path) -> Path:
    """A `tokenizer.json` that encodes as the `bytes` tokenizer does: UTF-8 byte b is id b, and
    `<eos>` is id 256 (a vocabulary entry, not an added token, so no text can contain it)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += range(ord("®"), ord("ÿ") + 1)
    chars = dict(zip(printable, map(chr, printable), strict=True))
    rest = [b for b in range(256) if b not in chars]
    chars.update({b: chr(256 + n) for n, b in enumerate(rest)})  # GPT-2's bytes_to_unicode
    vocab = {chars[b]: b for b in range(256)} | {"<eos>": 256}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return path


@contextlib.contextmanager
def working_dir(path: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def run_datatrove(
    shards: Path,
    out: Path,
    fmt: str,
    name: str,
    tokenizer_file: Path,
    eos_token: str,
    template: str | None = None,
) -> None:
    """datatrove's writer for `fmt` on every shard of `shards` (shard i as rank i) into `out`.

    The tokenizer file is copied to `name` (a path relative to a scratch working folder), so
    datatrove loads it from disk and records `name`, as a run with the hub id `name` would.
    With `template` (`<bos> $A <eos>`), the writer's post-processor is that template instead of
    the `$A <EOS>` its `eos_token` gives.
    """
    from datatrove.data import Document
    from datatrove.pipeline.tokens.megatron_tokenizer import MegatronDocumentTokenizer
    from datatrove.pipeline.tokens.tokenizer import DocumentTokenizer
    from tokenizers import Tokenizer
    from tokenizers.processors import TemplateProcessing

    scratch = out.with_name(f"{out.name}-tokenizer")
    (scratch / name).parent.mkdir(parents=True, exist_ok=True)
    (scratch / name).write_bytes(tokenizer_file.read_bytes())
    for rank, shard in enumerate(sorted(shards.glob("shard-*.parquet"))):
        table = pq.read_table(shard, columns=["id", "text"])
        docs = [
            Document(text=text, id=doc_id)
            for doc_id, text in zip(table["id"].to_pylist(), table["text"].to_pylist(), strict=True)
        ]
        with working_dir(scratch):
            if fmt == "megatron":
                step = MegatronDocumentTokenizer(
                    str(out), tokenizer_name_or_path=name, eos_token=eos_token
                )
            else:
                step = DocumentTokenizer(
                    str(out), tokenizer_name_or_path=name, eos_token=eos_token,
                    shuffle_documents=False,
                )  # fmt: skip
            if template is not None:
                specials = Tokenizer.from_file(name).get_vocab(with_added_tokens=True)
                used = sorted({t for t in template.split() if t != "$A"})
                step.post_processor = TemplateProcessing(
                    single=template, special_tokens=[(t, specials[t]) for t in used]
                )
            step.run(iter(docs), rank=rank)


def read_megatron(folder: Path) -> list[list[np.ndarray]]:
    """Every `*_tokens.idx`/`.bin` pair read by its documented layout: the documents of each."""
    files = []
    for idx in sorted(folder.glob("*_tokens.idx")):
        raw = idx.read_bytes()
        assert raw[:9] == b"MMIDIDX\x00\x00"
        version, code, sequences, documents = struct.unpack_from("<QBQQ", raw, 9)
        assert version == 1 and documents == sequences + 1
        offset = 9 + 8 + 1 + 8 + 8
        lengths = np.frombuffer(raw, "<i4", sequences, offset)
        pointers = np.frombuffer(raw, "<i8", sequences, offset + 4 * sequences)
        doc_index = np.frombuffer(raw, "<i8", documents, offset + 12 * sequences)
        assert offset + 12 * sequences + 8 * documents == len(raw)
        assert doc_index.tolist() == list(range(documents))  # one sequence per document
        dtype = MEGATRON_DTYPES[code]
        tokens = np.frombuffer(idx.with_suffix(".bin").read_bytes(), dtype)
        assert int(lengths.sum()) == tokens.size
        starts = (pointers // dtype.itemsize).tolist()
        files.append([tokens[p : p + n] for p, n in zip(starts, lengths.tolist(), strict=True)])
    return files


def read_nanotron(folder: Path, token_size: int) -> list[list[np.ndarray]]:
    """Every `*.ds` with its `.ds.index` (uint64 document ends): the documents of each."""
    dtype = np.dtype("<u2" if token_size == 2 else "<u4")
    files = []
    for ds in sorted(folder.glob("*.ds")):
        tokens = np.frombuffer(ds.read_bytes(), dtype)
        ends = np.frombuffer(ds.with_name(ds.name + ".index").read_bytes(), "<u8").tolist()
        assert ends[-1] == tokens.size
        files.append([tokens[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True)])
    return files
