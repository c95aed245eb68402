"""Published builds read where they are: `TokenDataset` on the URL of a published token build
(moto's S3 server, and nginx behind our counting proxy) and `load_snapshot` on the URL of a
published task snapshot, against the same builds on disk."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from support.corpus import run_corpus
from support.mirrors import build_manifest as manifest
from support.mirrors import fault_proxy, nginx, s3_client, s3_server

from corpus_assets import dataset
from corpus_assets.core.errors import DataError
from corpus_assets.dataset import TokenDataset
from corpus_assets.tasks.snapshot import load_snapshot

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "tiny.toml"
TASKS = REPO / "examples" / "tasks" / "arithmetic.yaml"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("built") / "data"
    for stage in ("fetch", "shard", "tokenize"):
        run_corpus("run", "--stage", stage, "--config", EXAMPLE, "--root", root, check=True)
    return root


@pytest.fixture(scope="module")
def snapshot_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    job = tmp_path_factory.mktemp("tasks") / "job"
    run_corpus("tasks", "--config", TASKS, "--output", job, check=True, env={"HF_HUB_OFFLINE": "1"})
    return job


def _fresh_s3fs() -> None:
    """s3fs keeps one instance per argument set, whatever the endpoint in the environment."""
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with s3_server(tmp_path_factory.mktemp("s3")) as env:
        mp = pytest.MonkeyPatch()
        for key, value in env.items():
            mp.setenv(key, value)
        _fresh_s3fs()
        try:
            s3_client(env).create_bucket(Bucket="pub")
            yield env
        finally:
            _fresh_s3fs()
            mp.undo()


def same_documents(remote: TokenDataset, local: TokenDataset) -> None:
    assert (len(remote), remote.tokens, remote.eos_id) == (len(local), local.tokens, local.eos_id)
    for i in range(len(local)):
        np.testing.assert_array_equal(remote[i], local[i])
    np.testing.assert_array_equal(remote[-1], local[-1])
    for a, b in zip(remote.windows(512), local.windows(512), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_token_build_published_to_s3_reads_like_the_one_on_disk(
    built: Path, s3: dict[str, str]
) -> None:
    tokens, shards = manifest(built, "tokens"), manifest(built, "shards")
    run_corpus("publish", tokens, "s3://pub/tiny/tokens", env=s3, check=True)
    run_corpus("publish", shards, "s3://pub/tiny/shards", env=s3, check=True)
    local = TokenDataset(tokens)
    remote = TokenDataset("s3://pub/tiny/tokens", shards="s3://pub/tiny/shards")
    try:
        same_documents(remote, local)
        last = len(local) - 1
        assert remote.provenance(last) == local.provenance(last)
        assert remote.provenance(0) == local.provenance(0)
    finally:
        remote.close()


def test_a_published_token_build_is_read_in_ranges_not_copied(
    built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over HTTP through the counting proxy: one document in the middle costs a few blocks of
    the index and the tokens, not the files."""
    tokens = manifest(built, "tokens")
    served = tmp_path / "served" / "tok"
    shutil.copytree(tokens.parent, served)
    doc = json.loads(tokens.read_text())
    total = sum(f["bytes"] for f in doc["files"])
    monkeypatch.setattr(dataset, "REMOTE_BLOCK", 4096)
    local = TokenDataset(tokens)
    with nginx(served.parent, tmp_path / "nginx") as base, fault_proxy(base) as proxy:
        remote = TokenDataset(f"{proxy.url}/tok")
        middle = len(local) // 2
        np.testing.assert_array_equal(remote[middle], local[middle])
        sent = proxy.sent
        remote.close()
        assert 0 < sent < total / 4, (sent, total)
        whole = TokenDataset(f"{proxy.url}/tok")
        try:
            same_documents(whole, local)
        finally:
            whole.close()


def test_a_missing_published_build_names_its_url(s3: dict[str, str]) -> None:
    with pytest.raises(FileNotFoundError, match=re.escape("s3://pub/nothing/_MANIFEST.json")):
        TokenDataset("s3://pub/nothing")


def test_a_task_snapshot_published_to_s3_loads_verified_from_its_url(
    snapshot_job: Path, s3: dict[str, str]
) -> None:
    run_corpus("publish", snapshot_job, "s3://pub/tasks/arith", env=s3, check=True)
    local = load_snapshot(snapshot_job)
    remote = load_snapshot("s3://pub/tasks/arith")
    assert remote.dataset_id == local.dataset_id
    assert remote.rows == local.rows
    assert list(remote.public_tasks()) == list(local.public_tasks())
    assert list(remote.references()) == list(local.references())
    assert remote.training_rows() == local.training_rows()
    assert remote.report == local.report
    assert str(remote.path) == "s3://pub/tasks/arith"


def test_a_changed_byte_in_a_published_snapshot_is_a_data_error(
    snapshot_job: Path, s3: dict[str, str]
) -> None:
    run_corpus("publish", snapshot_job, "s3://pub/tasks/changed", env=s3, check=True)
    client = s3_client(s3)
    key = "tasks/changed/train.jsonl"
    body = client.get_object(Bucket="pub", Key=key)["Body"].read()
    client.put_object(Bucket="pub", Key=key, Body=body.replace(b"{", b"[", 1))
    _fresh_s3fs()  # no listing or block cached from before the change
    with pytest.raises(DataError, match=re.escape("train.jsonl sha256 mismatch")):
        load_snapshot("s3://pub/tasks/changed")


def test_a_url_that_holds_no_snapshot_is_a_data_error(s3: dict[str, str]) -> None:
    with pytest.raises(DataError, match=re.escape("snapshot s3://pub/tasks/none: no such folder")):
        load_snapshot("s3://pub/tasks/none")


def test_corpus_build_publish_puts_shards_and_tokens_where_the_tokens_find_their_shards(
    tmp_path: Path, s3: dict[str, str]
) -> None:
    root = tmp_path / "data"
    done = run_corpus("build", EXAMPLE, "--root", root, "--publish", "s3://pub/builds", env=s3)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    tokens_rel = str(Path(summary["tokens_manifest"]).parent)
    shards_rel = str(Path(summary["shards_manifest"]).parent)
    assert summary["published"]["tokens"]["url"] == f"s3://pub/builds/{tokens_rel}"
    assert summary["published"]["shards"]["url"] == f"s3://pub/builds/{shards_rel}"
    for rel in (tokens_rel, shards_rel):
        verified = run_corpus("verify", f"s3://pub/builds/{rel}", env=s3)
        assert verified.returncode == 0, verified.stderr
    local = TokenDataset(root / tokens_rel)
    remote = TokenDataset(f"s3://pub/builds/{tokens_rel}")  # its shards found by the manifest
    try:
        assert len(remote) == len(local)
        assert remote.provenance(len(local) - 1) == local.provenance(len(local) - 1)
    finally:
        remote.close()


def test_corpus_build_publish_refuses_a_url_with_credentials_before_building(
    tmp_path: Path, s3: dict[str, str]
) -> None:
    root = tmp_path / "data"
    url = "s3://key:hunter2@pub/builds"
    done = run_corpus("build", EXAMPLE, "--root", root, "--publish", url, env=s3)
    assert done.returncode == 64, done.stderr
    assert "has a user or password in it" in done.stderr and "hunter2" not in done.stderr
    assert not (root / "corpus").exists()  # nothing was built


def test_a_publish_that_fails_after_the_build_keeps_the_build_and_says_why(
    tmp_path: Path, s3: dict[str, str]
) -> None:
    root = tmp_path / "data"
    done = run_corpus(
        "build", EXAMPLE, "--root", root, "--publish", "s3://no-such-bucket/x", env=s3
    )
    assert done.returncode == 65, done.stderr
    summary = json.loads(done.stdout)
    assert summary["success"] is True
    assert "no-such-bucket" in summary["published"]["error"]
    assert (root / summary["tokens_manifest"]).is_file()  # the build stands


def test_corpus_build_publish_of_a_task_config_publishes_its_snapshot(
    tmp_path: Path, s3: dict[str, str]
) -> None:
    root = tmp_path / "data"
    done = run_corpus("build", TASKS, "--root", root, "--publish", "s3://pub/taskbuilds", env=s3)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    url = summary["published"]["tasks"]["url"]
    assert url.startswith("s3://pub/taskbuilds/")
    assert load_snapshot(url).dataset_id == summary["dataset_id"]
