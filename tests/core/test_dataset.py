"""`corpus_assets.TokenDataset`: round trip to the shard texts, windows, provenance, relocation."""

from __future__ import annotations

import itertools
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from test_tokenize import GPT2, build, tiny_docs
from tokenizers import Tokenizer

from corpus_assets import TokenDataset

DOCS = tiny_docs(400)


@pytest.fixture(scope="module")
def bytes_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bytes")
    return build(root, {"id": "bytes"}, DOCS, n_shards=3)[2]


@pytest.fixture(scope="module")
def gpt2_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("gpt2")
    return build(root, {"id": "gpt2", "path": str(GPT2)}, DOCS, n_shards=3)[2]


def test_bytes_round_trip(bytes_build: Path) -> None:
    ds = TokenDataset(bytes_build)
    assert len(ds) == len(DOCS)
    for i, (_, text) in enumerate(DOCS):
        doc = ds[i]
        assert doc[-1] == ds.eos_id == 256
        assert doc[:-1].astype(np.uint8).tobytes().decode("utf-8") == text
    assert ds.tokens == sum(len(t.encode()) + 1 for _, t in DOCS)


def test_gpt2_round_trip(gpt2_build: Path) -> None:
    ds = TokenDataset(gpt2_build / "_MANIFEST.json")
    tok = Tokenizer.from_file(str(GPT2))
    assert len(ds) == len(DOCS) and ds.eos_id == 50256 and ds.dtype == np.dtype("<u2")
    for i, (_, text) in enumerate(DOCS):
        doc = ds[i]
        assert doc[-1] == 50256
        assert tok.decode(doc[:-1].tolist(), skip_special_tokens=False) == text
    assert ds[-1].tolist() == ds[len(ds) - 1].tolist()
    assert ds.tokens == sum(len(ds[i]) for i in range(len(ds)))


def test_full_tinystories_token_count(tmp_path: Path) -> None:
    """The data README's known fact: the 1,727 stories are 345,205 GPT-2 tokens (plus EOS)."""
    ds = TokenDataset(build(tmp_path, {"id": "gpt2", "path": str(GPT2)}, tiny_docs(), 2)[2])
    assert len(ds) == 1727
    assert ds.tokens == 345_205 + 1727


def test_index_errors(bytes_build: Path) -> None:
    ds = TokenDataset(bytes_build)
    with pytest.raises(IndexError):
        ds[len(ds)]
    with pytest.raises(IndexError):
        ds[-len(ds) - 1]


def test_documents_are_read_only_views(bytes_build: Path) -> None:
    doc = TokenDataset(bytes_build)[3]
    with pytest.raises(ValueError):
        doc[0] = 1


@pytest.mark.parametrize("seq_len", [1, 7, 1024, 5000])
def test_windows_cover_the_stream(bytes_build: Path, seq_len: int) -> None:
    ds = TokenDataset(bytes_build)
    stream = np.concatenate([ds[i] for i in range(len(ds))])
    windows = list(ds.windows(seq_len))
    assert len(windows) == (ds.tokens - 1) // seq_len
    for k, w in enumerate(windows):
        assert len(w) == seq_len + 1
        assert np.array_equal(w, stream[k * seq_len : k * seq_len + seq_len + 1])
    # consecutive windows share one token: inputs w[:-1], targets w[1:]
    assert all(a[-1] == b[0] for a, b in itertools.pairwise(windows))


def test_windows_cross_file_boundaries(bytes_build: Path) -> None:
    ds = TokenDataset(bytes_build)
    first_file_tokens = int(np.fromfile(bytes_build / "shard-00000.idx", "<u8")[-1])
    span = ds.token_range(first_file_tokens - 3, first_file_tokens + 3)
    expected = np.concatenate(
        [
            np.fromfile(bytes_build / "shard-00000.bin", "<u2")[-3:],
            np.fromfile(bytes_build / "shard-00001.bin", "<u2")[:3],
        ]
    )
    assert np.array_equal(span, expected)


def test_windows_with_stride(bytes_build: Path) -> None:
    ds = TokenDataset(bytes_build)
    windows = ds.windows(16, stride=100)
    assert np.array_equal(next(windows), ds.token_range(0, 17))
    assert np.array_equal(next(windows), ds.token_range(100, 117))
    with pytest.raises(ValueError):
        next(ds.windows(0))


def test_provenance(bytes_build: Path) -> None:
    ds = TokenDataset(bytes_build)
    per_shard = -(-len(DOCS) // 3)
    for i in (0, 1, per_shard - 1, per_shard, len(DOCS) - 1, 250):
        p = ds.provenance(i)
        assert p.shard == f"shard-{i // per_shard:05d}.parquet"
        assert p.row == i % per_shard
        assert p.id == DOCS[i][0]
    shards = bytes_build.parents[4] / "corpus" / "t" / "v1" / bytes_build.name
    assert pq.read_table(shards / "shard-00002.parquet").column("id")[0].as_py() == DOCS[268][0]


def test_relocated_root(bytes_build: Path, tmp_path: Path) -> None:
    """Manifests hold relative paths: a copied data root reads (and finds its shards) elsewhere."""
    root = bytes_build.parents[4]
    copy = tmp_path / "moved"
    shutil.copytree(root, copy)
    moved = TokenDataset(copy / bytes_build.relative_to(root))
    assert moved.provenance(123).id == DOCS[123][0]
    assert np.array_equal(moved[5], TokenDataset(bytes_build)[5])


def test_provenance_without_shards(bytes_build: Path, tmp_path: Path) -> None:
    alone = tmp_path / "tokens-only"
    shutil.copytree(bytes_build, alone)
    ds = TokenDataset(alone)
    assert len(ds[0]) > 0
    with pytest.raises(FileNotFoundError, match="provenance ids need the shards"):
        ds.provenance(0)


def test_not_a_token_manifest(tmp_path: Path) -> None:
    (tmp_path / "_MANIFEST.json").write_text('{"kind": "shards"}')
    with pytest.raises(ValueError, match="not a token build"):
        TokenDataset(tmp_path)


def test_import_is_cheap() -> None:
    code = (
        "import sys, corpus_assets; from corpus_assets import TokenDataset;"
        "print(sorted(m for m in ('numpy', 'pyarrow', 'tokenizers', 'dagster', 'pydantic')"
        " if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_pickles_as_its_path(bytes_build: Path) -> None:
    """Data-loader workers get the dataset by pickle: its path, re-mapped, not the tokens."""
    import pickle

    ds = TokenDataset(bytes_build)
    blob = pickle.dumps(ds)
    assert len(blob) < 1000
    again = pickle.loads(blob)
    assert len(again) == len(ds) and np.array_equal(again[7], ds[7])
