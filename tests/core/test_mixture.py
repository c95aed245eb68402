"""Mixtures (`corpus mix`'s core and `MixtureDataset`): shares, validation, shards of ranks,
resuming, byte-stable index, changed components refused."""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.mixtures import write_build, write_config

from corpus_assets import TokenDataset
from corpus_assets.core.errors import ConfigError, DataError, UpstreamMissing
from corpus_assets.core.mixture_config import load_mixture_config
from corpus_assets.core.stages.mixture import MixResult, mix
from corpus_assets.core.stages.verify import verify_path
from corpus_assets.core.store import mixture_registry, registry
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.locks import build_lock
from corpus_assets.core.store.progress import Progress, silent
from corpus_assets.mixture import ComponentChanged, MixtureDataset

WEIGHTS = {"web": 0.6, "code": 0.3, "math": 0.1}
SEQ_LEN = 32
SHARE = 0.05


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("builds")
    return {
        "web": write_build(folder, "web", shards=4, docs_per_shard=600, seed=1),
        "code": write_build(folder, "code", shards=3, docs_per_shard=400, mean_tokens=90, seed=2),
        "math": write_build(folder, "math", shards=2, docs_per_shard=300, mean_tokens=40, seed=3),
    }


def weighted(builds: dict[str, Path], weights: dict[str, float] = WEIGHTS) -> list[dict[str, Any]]:
    return [{"name": n, "tokens": str(builds[n]), "weight": w} for n, w in weights.items()]


def build_mixture(
    tmp: Path, comps: list[dict[str, Any]], workers: int = 1, **top: Any
) -> MixResult:
    top = {"seq_len": SEQ_LEN, "validation_share": SHARE, **top}
    config = write_config(tmp / "mix.json", comps, **top)
    return mix(load_mixture_config(config), Layout(tmp / "root"), workers, Progress("mix", silent))


@pytest.fixture(scope="module")
def mixed(builds: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> MixResult:
    return build_mixture(tmp_path_factory.mktemp("mixed"), weighted(builds))


@pytest.fixture(scope="module")
def ds(mixed: MixResult) -> MixtureDataset:
    return MixtureDataset(mixed.folder)


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def build_index(build: TokenDataset) -> dict[tuple[str, int], int]:
    """(shard, row) -> document number in the build."""
    out, base = {}, 0
    for f in build.manifest["files"]:
        if f["name"].endswith(".bin"):
            out.update({(f["shard"], r): base + r for r in range(f["documents"])})
            base += f["documents"]
    return out


def held_out(doc_id: str) -> bool:
    """The rule, written out: blake2b-8 of the id, little-endian, below share * 2**64."""
    h = int.from_bytes(hashlib.blake2b(doc_id.encode(), digest_size=8).digest(), "little")
    return h < int(SHARE * 2**64)


def test_realized_shares_are_within_one_percent_of_the_weights(
    mixed: MixResult, ds: MixtureDataset
) -> None:
    counts = {name: 0 for name in WEIGHTS}
    for i in range(len(ds)):
        counts[ds.provenance(i).component] += 1
    shares = {name: n / len(ds) for name, n in counts.items()}
    for name, weight in WEIGHTS.items():
        assert shares[name] == pytest.approx(weight, abs=0.01)
    recorded = {c["name"]: c for c in mixed.manifest["components"]}
    assert {n: c["share"] for n, c in recorded.items()} == pytest.approx(shares, abs=1e-6)
    assert {n: c["asked"]["weight"] for n, c in recorded.items()} == WEIGHTS
    # no component is upsampled unless asked: the scarcest is read once, the others less
    assert sorted(c["epochs"] for c in recorded.values())[-1] == 1.0
    assert mixed.manifest["train"]["samples"] == len(ds) == sum(counts.values())


def test_a_sample_is_its_documents_tokens_from_its_offset(
    ds: MixtureDataset, builds: dict[str, Path]
) -> None:
    tokens = {n: TokenDataset(p) for n, p in builds.items()}
    numbers = {n: build_index(b) for n, b in tokens.items()}
    for i in range(0, len(ds), 37):
        sample, where = ds[i], ds.provenance(i)
        assert sample.shape == (SEQ_LEN + 1,)
        build = tokens[where.component]
        docs = [build[numbers[where.component][(p.shard, p.row)]] for p in where.documents]
        stream = np.concatenate(docs)
        assert np.array_equal(sample, stream[where.offset : where.offset + SEQ_LEN + 1])
        assert not any(held_out(p.id) for p in where.documents)


def test_validation_and_training_never_share_a_document(
    ds: MixtureDataset, mixed: MixResult
) -> None:
    val = MixtureDataset(mixed.folder, split="validation")
    train_ids = {p.id for i in range(len(ds)) for p in ds.provenance(i).documents}
    val_ids = {p.id for i in range(len(val)) for p in val.provenance(i).documents}
    assert train_ids and val_ids
    assert not train_ids & val_ids
    assert all(held_out(d) for d in val_ids)
    assert len(val_ids) <= mixed.manifest["validation"]["documents"]
    assert mixed.manifest["validation"]["samples"] == len(val)


def test_the_held_out_documents_stay_held_out_when_a_component_grows(tmp_path: Path) -> None:
    small = write_build(tmp_path / "s", "web", shards=2, docs_per_shard=300, seed=1)
    grown = write_build(tmp_path / "g", "web", shards=4, docs_per_shard=300, seed=1)
    held = []
    for name, build in (("small", small), ("grown", grown)):
        result = build_mixture(
            tmp_path / name, [{"name": "web", "tokens": str(build), "weight": 1}]
        )
        val = MixtureDataset(result.folder, split="validation")
        held.append({p.id for i in range(len(val)) for p in val.provenance(i).documents})
    assert held[0] and held[0] <= held[1]
    assert all(held_out(d) for d in held[1])


@pytest.mark.parametrize("world_size", [1, 2, 3, 8])
def test_shards_of_any_world_size_partition_the_same_global_order(
    ds: MixtureDataset, world_size: int
) -> None:
    order = [ds[i] for i in range(len(ds))]
    seen: dict[int, np.ndarray] = {}
    for rank in range(world_size):
        part = ds.shard(rank, world_size)
        for j, sample in enumerate(part):
            g = part.global_index(j)
            assert g not in seen
            seen[g] = sample
    assert sorted(seen) == list(range(len(ds)))
    assert all(np.array_equal(seen[g], order[g]) for g in seen)


@settings(max_examples=40, deadline=None)
@given(world_size=st.integers(1, 9), start=st.integers(0, 5000))
def test_shards_from_any_start_cover_the_rest_once(
    ds: MixtureDataset, world_size: int, start: int
) -> None:
    start = min(start, len(ds))
    indices = [
        ds.shard(r, world_size, start).global_index(j)
        for r in range(world_size)
        for j in range(len(ds.shard(r, world_size, start)))
    ]
    assert sorted(indices) == list(range(start, len(ds)))


def test_a_resumed_reader_continues_with_the_exact_next_sample(ds: MixtureDataset) -> None:
    whole = list(ds.shard(3, 8))
    part = ds.shard(3, 8)
    it = iter(part)
    for _ in range(100):
        next(it)
    state = json.loads(json.dumps(part.state()))  # saved with a checkpoint
    assert state["sample"] == 800
    fresh = pickle.loads(pickle.dumps(MixtureDataset(ds.folder)))  # another process
    resumed = fresh.shard(3, 8).resume(state)
    assert np.array_equal(next(iter(resumed)), whole[100])
    assert all(np.array_equal(a, b) for a, b in zip(resumed, whole[101:], strict=True))
    # elastic: the same state on 4 ranks reads the same next global samples
    round_of_4 = [next(iter(fresh.shard(r, 4).resume(state))) for r in range(4)]
    assert all(np.array_equal(s, ds[800 + r]) for r, s in enumerate(round_of_4))


def test_the_same_config_gives_the_same_index_bytes_for_any_worker_count(
    builds: dict[str, Path], mixed: MixResult, tmp_path: Path
) -> None:
    again = build_mixture(tmp_path, weighted(builds), workers=3)
    assert again.folder != mixed.folder
    assert folder_bytes(again.folder) == folder_bytes(mixed.folder)
    assert again.manifest == mixed.manifest | {"components": again.manifest["components"]}


def test_the_index_bytes_are_pinned(mixed: MixResult) -> None:
    """numpy's PCG64 permutation and the layout of the rows, as shipped."""
    digests = {f["name"]: f["sha256"][:16] for f in mixed.manifest["files"]}
    assert digests == {
        "train.npy": "3b156a2dc431da12",
        "validation.npy": "09a8124e693acce5",
        "runs.npy": "ba4f11d5efb06497",
    }


def test_a_second_mix_finds_the_mixture_built(builds: dict[str, Path], tmp_path: Path) -> None:
    first = build_mixture(tmp_path, weighted(builds))
    again = build_mixture(tmp_path, weighted(builds))
    assert (first.cached, again.cached) == (False, True)
    assert again.manifest == first.manifest


def test_token_budgets_upsample_counted_as_epochs(builds: dict[str, Path], tmp_path: Path) -> None:
    tokens = TokenDataset(builds["math"]).tokens
    comps = [
        {"name": "math", "tokens": str(builds["math"]), "token_budget": 3 * tokens},
        {"name": "code", "tokens": str(builds["code"]), "token_budget": 1000 * SEQ_LEN},
    ]
    result = build_mixture(tmp_path, comps, validation_share=0.0)
    math, code = result.manifest["components"]
    assert math["epochs"] == pytest.approx(3 * tokens / math["training_tokens"], rel=0.01)
    assert (code["samples"], code["realized_tokens"]) == (1000, 1000 * SEQ_LEN)
    ds = MixtureDataset(result.folder)
    assert len(ds) == math["samples"] + code["samples"]
    assert result.manifest["validation"] == {"samples": 0, "documents": 0, "tokens": 0}


def test_a_changed_component_is_refused(builds: dict[str, Path], tmp_path: Path) -> None:
    copies = {
        n: Path(shutil.copytree(p.parent.parent, tmp_path / n)) / "tokens" / n
        for n, p in builds.items()
    }
    result = build_mixture(tmp_path, weighted(copies))
    assert verify_path(result.folder) == []
    manifest = copies["code"] / "_MANIFEST.json"
    doc = json.loads(manifest.read_text())
    doc["build_id"] = "corpus/code/v2/111111111111"  # rebuilt in place
    manifest.write_text(json.dumps(doc))
    with pytest.raises(ComponentChanged, match=r"component 'code' of mixture mix-\w{12} changed"):
        MixtureDataset(result.folder)
    problems = verify_path(result.folder)
    assert len(problems) == 1 and "component 'code'" in problems[0]
    assert "\n" not in problems[0]
    with pytest.raises(DataError, match=r"component 'code' .* changed since the mixture was built"):
        build_mixture(tmp_path, weighted(copies))


def test_a_changed_index_file_fails_verify(builds: dict[str, Path], tmp_path: Path) -> None:
    result = build_mixture(tmp_path, weighted(builds))
    train = result.folder / "train.npy"
    data = bytearray(train.read_bytes())
    data[-1] ^= 1
    train.write_bytes(bytes(data))
    assert verify_path(result.folder) == [f"{train}: sha256 differs from the manifest"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"components": [{"name": "a", "tokens": "x", "weight": 1, "token_budget": 5}]},
            "set exactly one of weight",
        ),
        (
            {
                "components": [
                    {"name": "a", "tokens": "x", "weight": 1},
                    {"name": "b", "tokens": "y", "token_budget": 9},
                ]
            },
            "every component has a weight, or every one a token_budget; not some of each",
        ),
        ({"components": []}, "no component; add at least one [[components]] table"),
        ({"seq": 5}, "unknown key 'seq' in the top level; allowed: name, seq_len"),
        (
            {"components": [{"name": "a", "tokens": "x", "weight": 1, "wieght": 2}]},
            "unknown key 'wieght' in [components[0] (a)]; allowed: name, tokens, weight",
        ),
    ],
)
def test_a_bad_config_is_one_line_naming_the_problem(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    raw = {"name": "m", "seq_len": 8, "components": [{"name": "a", "tokens": "x", "weight": 1}]}
    path = tmp_path / "m.json"
    path.write_text(json.dumps(raw | change))
    with pytest.raises(ConfigError) as err:
        load_mixture_config(path)
    assert message in str(err.value)
    assert "\n" not in str(err.value)
    assert str(err.value).count(";") == message.count(";")  # that problem alone


def test_components_of_two_tokenizers_are_refused(builds: dict[str, Path], tmp_path: Path) -> None:
    other = (
        Path(shutil.copytree(builds["math"].parent.parent, tmp_path / "other")) / "tokens" / "math"
    )
    manifest = other / "_MANIFEST.json"
    manifest.write_text(manifest.read_text().replace('"synthetic"', '"gpt2"'))
    comps = [
        {"name": "web", "tokens": str(builds["web"]), "weight": 1},
        {"name": "math", "tokens": str(other), "weight": 1},
    ]
    with pytest.raises(ConfigError, match="a mixture's components share one tokenizer"):
        build_mixture(tmp_path, comps)


def test_a_published_mixture_reads_the_same_samples_by_ranged_reads(
    ds: MixtureDataset, mixed: MixResult
) -> None:
    """Opened by URL (fsspec; `file://` here, as `s3://` would be), components too."""
    remote = MixtureDataset(f"file://{mixed.folder}")
    assert len(remote) == len(ds)
    assert remote._parts[0].files is None  # really not memory-mapped
    for i in range(0, len(ds), 53):
        assert np.array_equal(remote[i], ds[i])
    assert remote.provenance(7) == ds.provenance(7)


def test_without_validation_the_shards_are_not_read(
    builds: dict[str, Path], tmp_path: Path
) -> None:
    copy = Path(shutil.copytree(builds["math"].parent.parent, tmp_path / "c")) / "tokens" / "math"
    shutil.rmtree(copy.parent.parent / "shards")
    comps = [{"name": "math", "tokens": str(copy), "weight": 1}]
    result = build_mixture(tmp_path, comps, validation_share=0.0)
    assert len(MixtureDataset(result.folder)) == result.manifest["train"]["samples"] > 0
    with pytest.raises(DataError, match=r"provenance ids need the shards .* validation_share = 0"):
        build_mixture(tmp_path / "held", comps, validation_share=0.1)


def test_a_component_not_built_is_upstream_missing(tmp_path: Path) -> None:
    comps = [{"name": "web", "tokens": str(tmp_path / "nothing"), "weight": 1}]
    with pytest.raises(UpstreamMissing, match="materialize tokens first: component 'web'"):
        build_mixture(tmp_path, comps)


def test_a_mixture_config_with_a_secret_is_not_registered(tmp_path: Path) -> None:
    url = "https://user:hunter2@example.com/tokens/a"
    secret = write_config(tmp_path / "secret.json", [{"name": "a", "tokens": url, "weight": 1}])
    with pytest.raises(ConfigError, match="a component URL carries a secret") as err:
        mixture_registry.register(secret, tmp_path / "root")
    assert "hunter2" not in str(err.value)
    assert not (tmp_path / "root").exists()
    plain = write_config(tmp_path / "plain.json", [{"name": "a", "tokens": "x", "weight": 1}])
    first = mixture_registry.register(plain, tmp_path / "root")
    again = mixture_registry.register(plain, tmp_path / "root")
    assert (first.new, again.new) == (True, False)
    assert mixture_registry.load(tmp_path / "root", first.config.partition_key) == first.config


def test_a_build_of_the_root_is_read_under_its_tokenize_lock(tmp_path: Path) -> None:
    """Named by partition key, a component waits while its tokens are being made again."""
    corpus = tmp_path / "web.json"
    source = {"name": "web", "kind": "jsonl", "path": "web.jsonl", "license": "cc0-1.0"}
    corpus.write_text(
        json.dumps(
            {"dataset": "web", "version": "v1", "tokenizer": {"id": "bytes"}, "sources": [source]}
        )
    )
    layout = Layout(tmp_path / "root")
    cfg = registry.register(corpus, layout).config
    build = write_build(tmp_path / "b", "web", shards=1, docs_per_shard=200)
    layout.tokens(cfg).parent.mkdir(parents=True)
    build.rename(layout.tokens(cfg))
    config = write_config(
        tmp_path / "mix.json",
        [{"name": "web", "tokens": cfg.partition_key, "weight": 1}],
        seq_len=8,
    )
    lines: list[str] = []
    done: list[MixResult] = []
    worker = threading.Thread(
        target=lambda: done.append(
            mix(load_mixture_config(config), layout, 1, Progress("mix", lines.append))
        )
    )
    with build_lock(layout.stage_lock(cfg.hash12, "tokenize"), "the tokenize stage"):
        worker.start()
        deadline = time.monotonic() + 60
        while not any("waiting for the tokens of web-v1-" in line for line in lines):
            assert time.monotonic() < deadline, lines
            time.sleep(0.01)
        assert worker.is_alive() and not done
    worker.join(timeout=60)
    assert done and done[0].manifest["components"][0]["tokens"] == cfg.partition_key
