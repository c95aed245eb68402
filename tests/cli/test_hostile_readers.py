"""Published token builds and mixtures read by URL against a misbehaving S3 (a proxy in front of
moto, tests/support/s3_proxy.py, that counts the faults it made): a reader returns the
published bytes or fails in one line naming the problem, never other bytes. A server that
ignores ranges (the whole object for every ranged GET), an object replaced while it is read,
a ranged GET cut short, and a mixture's index file
changed after it was published."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.corpus import run_corpus
from support.mirrors import fault_proxy, nginx, s3_client, s3_server
from support.mixtures import write_build, write_config
from support.s3_proxy import S3Proxy, s3_proxy

from corpus_assets import dataset
from corpus_assets.dataset import TokenDataset
from corpus_assets.mixture import MixtureDataset

BLOCK = 4096  # bytes per ranged read: a document in the middle is in a block past the first


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two token builds and their mixture on disk, published to moto at the same places."""
    folder = tmp_path_factory.mktemp("published")
    builds = {n: write_build(folder, n, 2, 400, seed=i) for i, n in enumerate(("a", "b"))}
    comps = [{"name": n, "tokens": str(p), "weight": 1} for n, p in builds.items()]
    config = write_config(folder / "mix.json", comps, seq_len=16, validation_share=0.1)
    built = json.loads(run_corpus("mix", config, "--root", folder / "root", check=True).stdout)
    mixture = Path(built["folder"])
    with s3_server(folder / "s3") as env:
        s3_client(env).create_bucket(Bucket="pub")
        for local in [*builds.values(), mixture]:
            where = local.relative_to(folder).as_posix()
            run_corpus("publish", local, f"s3://pub/x/{where}", env=env, check=True)
        yield {
            "env": env,
            "build": builds["a"],
            "build_url": "s3://pub/x/tokens/a",
            "mixture": mixture,
            "mixture_url": f"s3://pub/x/{mixture.relative_to(folder).as_posix()}",
        }


@pytest.fixture
def proxy(published: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Proxy]:
    """The proxy in front of moto, the readers pointed at it, small blocks."""
    import s3fs

    env = published["env"]
    with s3_proxy(env["AWS_ENDPOINT_URL"]) as running:
        for key, value in {**env, "AWS_ENDPOINT_URL": running.url}.items():
            monkeypatch.setenv(key, value)
        monkeypatch.setattr(dataset, "REMOTE_BLOCK", BLOCK)
        s3fs.S3FileSystem.clear_instance_cache()
        try:
            yield running
        finally:
            s3fs.S3FileSystem.clear_instance_cache()


def read_until_refused(remote: TokenDataset, local: TokenDataset, order: list[int]) -> str:
    """Read documents in `order`: each one read must be the local one; the refusal's message."""
    with pytest.raises(OSError) as refused:
        for i in order:
            np.testing.assert_array_equal(remote[i], local[i])
    return str(refused.value)


def test_a_server_that_ignores_ranges_is_refused_never_read_as_other_bytes(
    published: dict[str, Any], proxy: S3Proxy
) -> None:
    proxy.ignore = {"range"}
    local = TokenDataset(published["build"])
    remote = TokenDataset(published["build_url"])
    try:
        middle = len(local) // 2  # its tokens are past the first block of its file
        message = read_until_refused(remote, local, [middle, *range(len(local))])
    finally:
        remote.close()
    assert proxy.ignored > 0  # the Range header really was dropped
    assert "the server sent" in message and "it ignored the range or cut the body" in message
    assert "s3://pub/x/tokens/a/shard-0000" in message


def test_an_object_replaced_while_it_is_read_is_refused_not_mixed(
    published: dict[str, Any], proxy: S3Proxy, tmp_path: Path
) -> None:
    """The new bytes would be read as the old file's rest: the reader compares the ETag of each
    answer with the one the file had when opened, so it needs no server to honour If-Match."""
    env, key = published["env"], "x/tokens/a/shard-00001.bin"
    client = s3_client(env)
    original = client.get_object(Bucket="pub", Key=key)["Body"].read()
    replaced: list[str] = []

    def replace(got: str, n: int) -> None:
        if got == key and n == 2 and not replaced:  # after the first block was read
            client.put_object(Bucket="pub", Key=key, Body=original[::-1])  # same size
            replaced.append(got)

    proxy.ignore = {"if-match"}  # a reader that relied on If-Match would read the new bytes
    proxy.before_get = replace
    local = TokenDataset(published["build"])
    remote = TokenDataset(published["build_url"])
    try:
        message = read_until_refused(remote, local, list(range(len(local) - 1, -1, -1)))
    finally:
        remote.close()
        client.put_object(Bucket="pub", Key=key, Body=original)
    assert replaced == [key]
    assert message.startswith(f"s3://pub/{key} changed while it was read"), message


def test_a_file_replaced_while_it_is_read_over_http_is_refused_not_mixed(
    published: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nginx: each ranged GET carries If-Match with the ETag the file had when opened; a file
    replaced meanwhile answers 412, read as "changed", not as the old file's rest."""
    served = tmp_path / "served" / "a"
    shutil.copytree(published["build"], served)
    monkeypatch.setattr(dataset, "REMOTE_BLOCK", BLOCK)
    local = TokenDataset(published["build"])
    with nginx(served.parent, tmp_path / "nginx") as base:
        remote = TokenDataset(f"{base}/a")
        try:
            np.testing.assert_array_equal(remote[0], local[0])  # the file is open and read
            target = served / "shard-00000.bin"
            stat = target.stat()
            target.write_bytes(target.read_bytes()[::-1])  # same size
            os.utime(target, (stat.st_atime + 10, stat.st_mtime + 10))  # nginx's ETag: mtime
            message = read_until_refused(remote, local, list(range(len(local))))
        finally:
            remote.close()
    assert message.startswith(f"{base}/a/shard-00000.bin changed while it was read"), message


@pytest.mark.parametrize("cuts", [3, 50])
def test_a_cut_ranged_read_over_http_is_asked_again_or_fails_in_one_line(
    published: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cuts: int
) -> None:
    """Through the TCP proxy in front of nginx, connections closed 3,000 bytes into their
    answers: 3 of them are read through (each read tried up to REMOTE_TRIES times); 50 fail
    one read in one line, naming the file and the bytes."""
    served = tmp_path / "served" / "a"
    shutil.copytree(published["build"], served)
    monkeypatch.setattr(dataset, "REMOTE_BLOCK", BLOCK)
    monkeypatch.setattr(dataset, "REMOTE_PAUSE_S", 0.01)
    local = TokenDataset(published["build"])
    with nginx(served.parent, tmp_path / "nginx") as base, fault_proxy(base) as cutting:
        cutting.plan = [("cut", 3000)] * cuts
        try:
            remote = TokenDataset(f"{cutting.url}/a")
            for i in range(len(local)):
                np.testing.assert_array_equal(remote[i], local[i])
            remote.close()
        except OSError as exc:
            assert cuts == 50, exc
            assert str(exc).startswith(f"{cutting.url}/a/shard-0000"), exc
            assert f"broke {dataset.REMOTE_TRIES} times" in str(exc)
        else:
            assert cuts == 3
    assert cutting.faults >= 3  # the connections really were cut


def test_a_ranged_read_cut_short_is_asked_again_and_reads_the_published_bytes(
    published: dict[str, Any], proxy: S3Proxy
) -> None:
    key = "x/tokens/a/shard-00000.bin"
    proxy.cut[(key, 2)] = 100  # the second ranged GET of the file ends after 100 bytes
    local = TokenDataset(published["build"])
    remote = TokenDataset(published["build_url"])
    try:
        for i in range(len(local)):
            np.testing.assert_array_equal(remote[i], local[i])
    finally:
        remote.close()
    assert proxy.cuts == 1 and proxy.gets[key] >= 3


def test_a_mixture_index_file_changed_after_publishing_is_refused(
    published: dict[str, Any], proxy: S3Proxy
) -> None:
    env, url = published["env"], published["mixture_url"]
    key = f"{url.removeprefix('s3://pub/')}/train.npy"
    client = s3_client(env)
    original = client.get_object(Bucket="pub", Key=key)["Body"].read()
    changed = bytearray(original)
    changed[-1] ^= 1  # one sample's start moved: a valid .npy that puts it elsewhere
    client.put_object(Bucket="pub", Key=key, Body=bytes(changed))
    try:
        with pytest.raises(ValueError, match="is not the file the mixture's manifest lists"):
            MixtureDataset(url)
    finally:
        client.put_object(Bucket="pub", Key=key, Body=original)
    mixture = MixtureDataset(url)  # the published bytes again
    local = MixtureDataset(published["mixture"])
    try:
        for i in range(0, len(local), 5):
            np.testing.assert_array_equal(mixture[i], local[i])
    finally:
        mixture.close()


def test_a_mixture_behind_a_server_that_ignores_ranges_fails_in_its_components(
    published: dict[str, Any], proxy: S3Proxy
) -> None:
    proxy.ignore = {"range"}
    remote, local = MixtureDataset(published["mixture_url"]), MixtureDataset(published["mixture"])
    try:
        with pytest.raises(OSError, match="it ignored the range or cut the body"):
            for i in range(len(local) - 1, -1, -1):
                np.testing.assert_array_equal(remote[i], local[i])
    finally:
        remote.close()
    assert proxy.ignored > 0
