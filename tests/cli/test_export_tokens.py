"""`corpus export-tokens` against datatrove 0.10's own writers, run side by side on the same
shards: `MegatronDocumentTokenizer` (Megatron-LM's indexed dataset) and `DocumentTokenizer` with
the shuffle off (nanotron's `.ds` files), for the bundled example and generated multi-shard
builds, with the GPT-2 tokenizer, the bytes tokenizer and a 4-byte vocabulary. Every file
datatrove writes must be in the export with the same bytes; the export runs after the shards
are deleted (it reads the token files, it does not tokenize again), and a reader of each
documented format finds every document of the build, token for token."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support.corpus import run_corpus, start_corpus
from support.mirrors import s3_client, s3_server
from support.token_exports import bytes_tokenizer, read_megatron, read_nanotron, run_datatrove
from support.waiting import wait_for

from corpus_assets.dataset import TokenDataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from test_tokenize import GPT2, build, tiny_docs, wordlevel

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
FORMATS = ("megatron", "nanotron")
CASES = [
    ("example", "bytes"),
    ("example", "gpt2"),
    ("generated", "bytes"),
    ("generated", "gpt2"),
    ("generated", "wordlevel"),
    ("generated", "gpt2-bos"),
]
EOT = "<|endoftext|>"


def corpus(*args: str | Path, env: dict[str, str] | None = None) -> Any:
    return run_corpus(*args, environ=env or ENV)


def generated_docs(tokenizer: str) -> list[tuple[str, str]]:
    """Stories, text in many scripts with odd whitespace, an empty and a very long document."""
    rng = random.Random(5)
    if tokenizer == "wordlevel":  # words of a 70,002-id vocabulary, some above 65,535
        words = [f"w{rng.randrange(70_000)}" for _ in range(20_000)] + ["unknown"]
        texts = [" ".join(rng.sample(words, rng.randrange(0, 60))) for _ in range(300)]
        return [(f"g-{i:04d}", t) for i, t in enumerate(texts)]
    alphabet = "abc xyz\n\t  é ß ø Ж я 中文 日本語 한국어 العربية हिन्दी 🙂🚀 \u200b\u00a0"
    mixed = [
        "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 400))) for _ in range(150)
    ]
    texts = [t for _, t in tiny_docs(300)] + mixed + ["", " ", "x" * 20_000]
    rng.shuffle(texts)
    return [(f"g-{i:04d}", t) for i, t in enumerate(texts)]


def tokenizer_of(name: str, folder: Path) -> tuple[dict[str, Any], Path, str, str | None]:
    """The config's `[tokenizer]`, a tokenizer.json datatrove loads, its EOS token, and the
    post-processor template datatrove needs to make our tokens (None: its `$A <EOS>`)."""
    if name == "bytes":
        return {"id": "bytes"}, bytes_tokenizer(folder / "bytes.json"), "<eos>", None
    if name == "gpt2":
        return {"id": "gpt2", "path": str(GPT2)}, GPT2, EOT, None
    if name == "gpt2-bos":  # GPT-2 whose own post-processor puts <|endoftext|> first, as a BOS
        from tokenizers import Tokenizer
        from tokenizers.processors import TemplateProcessing

        tok = Tokenizer.from_file(str(GPT2))
        tok.post_processor = TemplateProcessing(single=f"{EOT} $A", special_tokens=[(EOT, 50256)])
        tok.save(str(folder / "gpt2-bos.json"))
        spec = {"id": name, "path": str(folder / "gpt2-bos.json")}
        return spec, folder / "gpt2-bos.json", EOT, f"{EOT} $A {EOT}"
    path = wordlevel(folder, 70_000)
    return {"id": "wordlevel", "path": str(path)}, path, "</s>", None


def build_example(folder: Path, tokenizer: dict[str, Any]) -> Path:
    """The bundled example built by `corpus run` with `tokenizer`; its tokens folder."""
    shutil.copytree(REPO / "examples" / "tiny", folder / "tiny")
    raw = tomllib.loads((REPO / "examples" / "tiny.toml").read_text(encoding="utf-8"))
    config = folder / "tiny.json"
    config.write_text(json.dumps({**raw, "tokenizer": tokenizer}), encoding="utf-8")
    root = folder / "root"
    for stage in ("fetch", "shard", "tokenize"):
        done = corpus("run", "--stage", stage, "--config", config, "--root", root)
        assert done.returncode == 0, done.stderr
    return (root / json.loads(done.stdout)["manifest"]).parent


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    """Each case's token build, datatrove's files of both formats beside it under
    `datatrove-<format>/`, and its shards deleted."""
    found = {}
    for source, name in CASES:
        folder = tmp_path_factory.mktemp(f"{source}-{name}")
        spec, file, eos, template = tokenizer_of(name, folder)
        if source == "example":
            tokens = build_example(folder, spec)
        else:
            _, _, tokens = build(folder / "root", spec, generated_docs(name), n_shards=4)
        manifest = json.loads((tokens / "_MANIFEST.json").read_text())
        shards = (tokens / manifest["shards_manifest"]).parent.resolve()
        assert len(list(shards.glob("shard-*.parquet"))) >= 3
        for fmt in FORMATS:
            theirs = folder / f"datatrove-{fmt}"
            run_datatrove(shards, theirs, fmt, spec["id"], file, eos, template)
        shutil.rmtree(shards)  # no text left: the export can only read the token files
        found[(source, name)] = tokens
    return found


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("source", "tokenizer"), CASES)
def test_the_export_is_what_datatrove_writes_byte_for_byte(
    builds: dict[tuple[str, str], Path], tmp_path: Path, source: str, tokenizer: str, fmt: str
) -> None:
    tokens = builds[(source, tokenizer)]
    theirs = tokens.parents[5] / f"datatrove-{fmt}"
    done = corpus("export-tokens", tokens, "--format", fmt, "--to", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    ours = tmp_path / "out"
    expected = sorted(p.name for p in theirs.iterdir())
    assert sorted(p.name for p in ours.iterdir()) == sorted([*expected, "_MANIFEST.json"])
    for name in expected:
        assert (ours / name).read_bytes() == (theirs / name).read_bytes(), name
    ds = TokenDataset(tokens)
    size = ds.dtype.itemsize
    files = read_megatron(ours) if fmt == "megatron" else read_nanotron(ours, size)
    read = [doc.tolist() for file in files for doc in file]
    assert read == [ds[i].tolist() for i in range(len(ds))]
    assert json.loads(done.stdout)["documents"] == len(ds) == len(read)
    if tokenizer == "gpt2-bos":  # the tokenizer's own BOS stays: datatrove needs its template
        assert all(doc[0] == doc[-1] == 50256 for doc in read)
    if fmt == "nanotron":
        first = (ours / "00000_unshuffled.ds.metadata").read_text().splitlines()[0]
        assert first == f"{tokenizer}|{size}"


def test_a_changed_token_file_is_refused_and_nothing_is_written(
    builds: dict[tuple[str, str], Path], tmp_path: Path
) -> None:
    tokens = shutil.copytree(builds[("example", "bytes")], tmp_path / "tokens")
    data = bytearray((tokens / "shard-00001.bin").read_bytes())
    data[100] ^= 1
    (tokens / "shard-00001.bin").write_bytes(bytes(data))
    done = corpus("export-tokens", tokens, "--format", "megatron", "--to", tmp_path / "out")
    assert done.returncode == 65, done.stderr
    assert "shard-00001.bin: does not match its manifest (sha256)" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokens"]  # no export, no staging


def test_a_rerun_keeps_the_export_and_another_one_is_refused(
    builds: dict[tuple[str, str], Path], tmp_path: Path
) -> None:
    tokens, out = builds[("example", "gpt2")], tmp_path / "out"
    first = corpus("export-tokens", tokens, "--format", "nanotron", "--to", out)
    assert first.returncode == 0 and json.loads(first.stdout)["reused"] is False, first.stderr
    again = corpus("export-tokens", tokens, "--format", "nanotron", "--to", out)
    assert again.returncode == 0 and json.loads(again.stdout)["reused"] is True, again.stderr
    other = corpus("export-tokens", tokens, "--format", "megatron", "--to", out)
    assert other.returncode == 64
    assert f"{out} already exists and holds something else; choose a new folder" in other.stderr
    bad = corpus("export-tokens", tokens, "--format", "olmo", "--to", tmp_path / "x")
    assert bad.returncode == 64 and "invalid choice: 'olmo'" in bad.stderr
    shards = corpus("export-tokens", tokens.parent, "--format", "megatron", "--to", tmp_path / "y")
    assert shards.returncode == 64 and "no _MANIFEST.json" in shards.stderr


def exported(tokens: Path, fmt: str, dest: Path) -> Any:
    """`corpus export-tokens` of a build on disk to a folder, which must succeed."""
    done = corpus("export-tokens", tokens, "--format", fmt, "--to", dest)
    assert done.returncode == 0, done.stderr
    return done


@contextmanager
def bucket(tmp_path: Path) -> Iterator[tuple[Any, dict[str, str]]]:
    """moto's S3 with the bucket `pub`: a client, and the environment for `corpus`."""
    with s3_server(tmp_path / "s3") as env:
        client = s3_client(env)
        client.create_bucket(Bucket="pub")
        yield client, {**ENV, **env}


def test_an_export_to_s3_is_published_and_verifies_there(
    builds: dict[tuple[str, str], Path], tmp_path: Path
) -> None:
    tokens = builds[("generated", "gpt2")]
    exported(tokens, "megatron", tmp_path / "local")
    with bucket(tmp_path) as (client, env):
        done = corpus(
            "export-tokens", tokens, "--format", "megatron", "--to", "s3://pub/m", env=env
        )
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert (result["reused"], result["dest"]) == (False, "s3://pub/m")
        assert corpus("verify", "s3://pub/m", env=env).returncode == 0
        for path in sorted((tmp_path / "local").iterdir()):
            body = client.get_object(Bucket="pub", Key=f"m/{path.name}")["Body"].read()
            assert body == path.read_bytes(), path.name
        again = corpus(
            "export-tokens", tokens, "--format", "megatron", "--to", "s3://pub/m", env=env
        )
        assert json.loads(again.stdout)["reused"] is True, again.stderr


def test_a_published_build_exports_the_same_bytes_as_the_one_on_disk(tmp_path: Path) -> None:
    """From its URL, to a folder and to another URL; a published token file changed since it
    was published is refused in one line and nothing is written."""
    _, _, tokens = build(tmp_path / "root", {"id": "bytes"}, tiny_docs(300), n_shards=3)
    local = exported(tokens, "nanotron", tmp_path / "local")
    with bucket(tmp_path) as (client, env):
        assert corpus("publish", tokens / "_MANIFEST.json", "s3://pub/t", env=env).returncode == 0
        done = corpus(
            "export-tokens", "s3://pub/t", "--format", "nanotron", "--to", tmp_path / "out", env=env
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["documents"] == json.loads(local.stdout)["documents"]
        for path in sorted((tmp_path / "local").iterdir()):  # the export manifest too
            assert (tmp_path / "out" / path.name).read_bytes() == path.read_bytes(), path.name
        remote = corpus(
            "export-tokens", "s3://pub/t/", "--format", "nanotron", "--to", "s3://pub/n", env=env
        )
        assert remote.returncode == 0, remote.stderr
        assert corpus("verify", "s3://pub/n", env=env).returncode == 0
        body = client.get_object(Bucket="pub", Key="n/_MANIFEST.json")["Body"].read()
        assert body == (tmp_path / "local" / "_MANIFEST.json").read_bytes()
        key = "t/shard-00002.bin"
        data = bytearray(client.get_object(Bucket="pub", Key=key)["Body"].read())
        data[7] ^= 1
        client.put_object(Bucket="pub", Key=key, Body=bytes(data))
        bad = corpus(
            "export-tokens", "s3://pub/t", "--format", "nanotron", "--to", tmp_path / "bad", env=env
        )
    assert bad.returncode == 65, bad.stderr
    (line,) = bad.stderr.strip().splitlines()[-1:]
    assert "s3://pub/t/shard-00002.bin: does not match its manifest (sha256)" in line
    assert sorted(p.name for p in tmp_path.iterdir() if "bad" in p.name) == []  # nor staging


@pytest.mark.parametrize(("fmt", "index"), [("megatron", ".idx"), ("nanotron", ".ds.index")])
def test_corpus_verify_checks_an_export_folder(
    builds: dict[tuple[str, str], Path], tmp_path: Path, fmt: str, index: str
) -> None:
    out = tmp_path / "out"
    done = corpus("export-tokens", builds[("example", "bytes")], "--format", fmt, "--to", out)
    assert done.returncode == 0, done.stderr
    assert corpus("verify", out).returncode == 0
    (name,) = [p.name for p in out.glob(f"00001_*{index}")]
    raw = bytearray((out / name).read_bytes())
    raw[-8:] = bytes(8)  # the last document's end (index) or document number (Megatron): 0
    (out / name).write_bytes(bytes(raw))
    changed = corpus("verify", out)
    assert (
        changed.returncode == 65 and f"{name}: sha256 differs from the manifest" in changed.stderr
    )
    doc = json.loads((out / "_MANIFEST.json").read_text())
    entry = next(e for e in doc["files"] if e["name"] == name)
    entry["sha256"] = hashlib.sha256(raw).hexdigest()  # a manifest that agrees with the change
    (out / "_MANIFEST.json").write_text(json.dumps(doc))
    forged = corpus("verify", out)
    assert forged.returncode == 65
    assert f"{name}: not an index of {entry['documents']} documents" in forged.stderr


def test_a_killed_export_leaves_no_folder_and_the_next_one_removes_its_staging(
    builds: dict[tuple[str, str], Path], tmp_path: Path
) -> None:
    tokens = shutil.copytree(builds[("example", "bytes")], tmp_path / "tokens")
    second = tokens / "shard-00001.bin"
    data = second.read_bytes()
    second.unlink()
    os.mkfifo(second)  # the export blocks opening it, after the first token file is staged
    out = tmp_path / "out"
    proc = start_corpus(
        "export-tokens", tokens, "--format", "megatron", "--to", out,
        environ=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    staged = out.with_name(f".out.staging-{proc.pid}")
    wait_for(lambda: (staged / "00000_tokens.bin").exists(), 60, "the first file", watch=[proc])
    proc.kill()
    assert proc.wait(30) == -signal.SIGKILL
    assert staged.is_dir() and not out.exists()
    second.unlink()
    second.write_bytes(data)
    done = corpus("export-tokens", tokens, "--format", "megatron", "--to", out)
    assert done.returncode == 0, done.stderr
    assert f"removing .out.staging-{proc.pid}, left by process {proc.pid} (gone)" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "tokens"]
    assert corpus("verify", out).returncode == 0
