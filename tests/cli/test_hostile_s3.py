"""S3 sources against moto's S3 server on loopback, as real buckets misbehave: keys that are one
path on disk, a key that is also a folder, versioned buckets, objects replaced between the
listing and the GET, bytes that do not match their ETag (a proxy in front of moto,
tests/support/s3_proxy.py, corrupts or cuts responses and replaces objects; it counts the faults
it made), and a prefix of 2,000 small objects. Each test runs `corpus run --stage fetch`."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from support.corpus import run_corpus
from support.mirrors import s3_client, s3_server
from support.s3_proxy import s3_proxy

FAST = {"CORPUS_FETCH_BACKOFF_S": "0.05", "HF_HUB_OFFLINE": "1"}
BUCKET = "corpora"


def docs(*texts: str) -> bytes:
    """JSONL of one document per text, the id the text's first word."""
    return "".join(json.dumps({"id": t.split()[0], "text": t}) + "\n" for t in texts).encode()


def config(folder: Path, url: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / "config.json"
    source = {"name": "web", "kind": "jsonl", "path": url, "id_field": "id", "license": "cc0-1.0"}
    spec = {"dataset": "s3", "version": "v1", "tokenizer": {"id": "bytes"}, "sources": [source]}
    out.write_text(json.dumps(spec), encoding="utf-8")
    return out


def fetch(
    tmp_path: Path, url: str, env: dict[str, str], *flags: str
) -> subprocess.CompletedProcess[str]:
    cfg = config(tmp_path, url)
    root = tmp_path / "data"
    return run_corpus(
        "run", "--stage", "fetch", "--config", cfg, "--root", root, *flags, env={**FAST, **env}
    )


def raw_texts(root: Path) -> list[str]:
    """The text of every document in the raw cache's one source, in order."""
    import pyarrow.parquet as pq

    (record,) = root.glob("raw/*/_SOURCE.json")
    files = json.loads(record.read_text(encoding="utf-8"))["files"]
    return [t for f in files for t in pq.read_table(record.parent / f["name"])["text"].to_pylist()]


def record(root: Path) -> dict[str, Any]:
    (path,) = root.glob("raw/*/_SOURCE.json")
    return dict(json.loads(path.read_text(encoding="utf-8")))


def bucket(env: dict[str, str], versioned: bool = False) -> Any:
    client = s3_client(env)
    client.create_bucket(Bucket=BUCKET)
    if versioned:
        client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    return client


def put(client: Any, key: str, data: bytes) -> dict[str, Any]:
    return dict(client.put_object(Bucket=BUCKET, Key=key, Body=data))


def downloaded(root: Path) -> list[Path]:
    """Files (or parts) the fetch wrote under raw/.downloads."""
    return [p for p in (root / "raw" / ".downloads").rglob("*") if p.is_file()]


def test_keys_that_are_one_path_on_disk_are_refused_in_one_line(tmp_path: Path) -> None:
    with s3_server(tmp_path / "s3") as env:
        client = bucket(env)
        for key in ("web/a.jsonl", "web//a.jsonl", "web/./a.jsonl"):
            put(client, key, docs(f"{key.replace('/', '_')} text"))
        done = fetch(tmp_path, f"s3://{BUCKET}/web/**", env)
    assert done.returncode == 65, done.stderr
    (line,) = done.stderr.strip().splitlines()[-1:]
    assert "would both be the file 'a.jsonl'" in line, done.stderr
    assert "web/./a.jsonl" in line and "web//a.jsonl" in line
    assert not downloaded(tmp_path / "data")


def test_a_key_that_is_also_a_folder_is_fetched_by_a_glob(tmp_path: Path) -> None:
    with s3_server(tmp_path / "s3") as env:
        client = bucket(env)
        put(client, "web/a.jsonl", docs("a first"))
        put(client, "web/x", docs("x beside its folder"))
        put(client, "web/x/y.jsonl", docs("y below x"))
        put(client, "web/", b"")  # a console's folder marker: not an object of the source
        done = fetch(tmp_path, f"s3://{BUCKET}/web/*", env)
        assert done.returncode == 0, done.stderr
        assert raw_texts(tmp_path / "data") == ["a first", "x beside its folder"]
        assert [r["name"] for r in record(tmp_path / "data")["remote"]] == ["a.jsonl", "x"]
        both = fetch(tmp_path / "both", f"s3://{BUCKET}/web/**", env)
    assert both.returncode == 65, both.stderr
    (line,) = both.stderr.strip().splitlines()[-1:]
    assert "is also the folder of" in line and "web/x/y.jsonl" in line


def test_a_glob_over_a_versioned_bucket_fetches_and_records_the_version(tmp_path: Path) -> None:
    with s3_server(tmp_path / "s3") as env:
        client = bucket(env, versioned=True)
        put(client, "web/part-0.jsonl", docs("old version"))
        new = put(client, "web/part-0.jsonl", docs("new version"))
        done = fetch(tmp_path, f"s3://{BUCKET}/web/*.jsonl", env)
        assert done.returncode == 0, done.stderr
        assert raw_texts(tmp_path / "data") == ["new version"]
        (kept,) = record(tmp_path / "data")["remote"]
        assert kept["version_id"] == new["VersionId"] and kept["etag"] == new["ETag"]
        again = fetch(tmp_path, f"s3://{BUCKET}/web/*.jsonl", env, "--refresh")
    assert again.returncode == 0, again.stderr  # the listing (no version) is the same object


def test_an_object_replaced_between_listing_and_get_is_kept_as_the_new_one(tmp_path: Path) -> None:
    with s3_server(tmp_path / "s3") as env:
        client = bucket(env)
        put(client, "web/a.jsonl", docs("listed version"))
        with s3_proxy(env["AWS_ENDPOINT_URL"]) as proxy:
            replaced: list[dict[str, Any]] = []

            def replace(key: str, n: int) -> None:
                if n == 1:
                    replaced.append(put(client, key, docs("replaced version")))

            proxy.before_get = replace
            done = fetch(tmp_path, f"s3://{BUCKET}/web/*.jsonl", {**env, **via(proxy)})
    assert done.returncode == 0, done.stderr
    assert len(replaced) == 1 and proxy.gets["web/a.jsonl"] == 1  # one GET, after the change
    assert raw_texts(tmp_path / "data") == ["replaced version"]
    (kept,) = record(tmp_path / "data")["remote"]
    assert kept["etag"] == replaced[0]["ETag"]


def test_an_object_replaced_mid_download_is_downloaded_again_whole(tmp_path: Path) -> None:
    old = docs(*(f"old{i} " + "o" * 200 for i in range(200)))
    new = docs(*(f"new{i} " + "n" * 200 for i in range(200)))
    assert len(old) == len(new)  # the same size: only the ETag tells them apart
    with s3_server(tmp_path / "s3") as env:
        client = bucket(env)
        put(client, "web/a.jsonl", old)
        with s3_proxy(env["AWS_ENDPOINT_URL"]) as proxy:
            proxy.cut[("web/a.jsonl", 1)] = 10_000  # the first GET ends after 10 kB

            def replace(key: str, n: int) -> None:
                if n == 2:  # before the GET that resumes at byte 10,000
                    put(client, key, new)

            proxy.before_get = replace
            done = fetch(tmp_path, f"s3://{BUCKET}/web/*.jsonl", {**env, **via(proxy)})
    assert done.returncode == 0, done.stderr
    assert proxy.cuts == 1 and proxy.gets["web/a.jsonl"] == 3  # cut, resumed, started again
    assert "was replaced; starting again" in done.stderr
    texts = raw_texts(tmp_path / "data")
    assert len(texts) == 200 and all(t.startswith("new") for t in texts)  # never old+new


def test_bytes_that_do_not_match_the_etag_md5_are_downloaded_again(tmp_path: Path) -> None:
    with s3_server(tmp_path / "s3") as env:
        client = bucket(env)
        put(client, "web/a.jsonl", docs("the true text"))
        with s3_proxy(env["AWS_ENDPOINT_URL"]) as proxy:
            proxy.corrupt = (b"true", b"TRUE", 1)  # one response's bytes, under the true ETag
            done = fetch(tmp_path, f"s3://{BUCKET}/web/*.jsonl", {**env, **via(proxy)})
            assert done.returncode == 0, done.stderr
            assert proxy.corrupted == 1 and proxy.gets["web/a.jsonl"] == 2
            assert "MD5 mismatch; downloading again" in done.stderr
            assert raw_texts(tmp_path / "data") == ["the true text"]
            proxy.corrupt = (b"true", b"TRUE", 100)  # every response: never the true bytes
            bad = fetch(tmp_path / "bad", f"s3://{BUCKET}/web/*.jsonl", {**env, **via(proxy)})
    assert bad.returncode == 65, bad.stderr
    (line,) = bad.stderr.strip().splitlines()[-1:]
    assert "do not match the object's MD5 (its ETag) in 3 downloads" in line
    assert not list((tmp_path / "bad" / "data").glob("raw/*/_SOURCE.json"))


@pytest.mark.timeout(300)
def test_two_thousand_small_objects_are_fetched_with_one_progress_line(tmp_path: Path) -> None:
    with s3_server(tmp_path / "s3") as env:
        client = bucket(env)
        texts = [f"doc{i:04d} small object {i}" for i in range(2000)]
        for i, text in enumerate(texts):
            put(client, f"many/part-{i:04d}.jsonl", docs(text))
        start = time.monotonic()
        done = fetch(tmp_path, f"s3://{BUCKET}/many/part-*.jsonl", env)
        seconds = time.monotonic() - start
    assert done.returncode == 0, done.stderr
    assert sorted(raw_texts(tmp_path / "data")) == texts
    lines = done.stderr.strip().splitlines()
    assert not [line for line in lines if "downloading s3://" in line]  # no line per object
    aggregated = [line for line in lines if "source web: downloaded" in line]
    assert aggregated[-1].endswith("16 at a time") and "downloaded 2,000 files" in aggregated[-1]
    assert len(aggregated) <= 1 + seconds / 5  # one line, and one more every 5 s of downloads
    assert len(lines) <= len(aggregated) + 5, done.stderr


def via(proxy: Any) -> dict[str, str]:
    """The environment that sends the fetch's S3 requests through `proxy`."""
    return {"AWS_ENDPOINT_URL": proxy.url}
