"""`corpus publish` and `corpus verify URL` against moto's S3 server on loopback: the bundled
example's shards and tokens and a task snapshot go up, verify where they are, and a changed,
missing or foreign object is found; a file name outside the build folder, and a store that
ignores conditional writes, are refused before any data file goes up."""

from __future__ import annotations

import http.client
import http.server
import json
import shutil
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from support.corpus import run_corpus
from support.mirrors import build_manifest as manifest
from support.mirrors import s3_client as s3
from support.mirrors import s3_server

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "tiny.toml"
TASKS = REPO / "examples" / "tasks" / "arithmetic.yaml"


def keys(client: Any, prefix: str) -> list[str]:
    listing = client.list_objects_v2(Bucket="pub", Prefix=prefix)
    return sorted(o["Key"] for o in listing.get("Contents", []))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("built") / "data"
    for stage in ("fetch", "shard", "tokenize"):
        run_corpus("run", "--stage", stage, "--config", EXAMPLE, "--root", root, check=True)
    return root


@pytest.fixture
def bucket(tmp_path: Path) -> Any:
    with s3_server(tmp_path / "s3") as env:
        client = s3(env)
        client.create_bucket(Bucket="pub")
        yield env, client


def test_a_published_shards_build_verifies_in_place_and_a_changed_byte_is_found(
    built: Path, bucket: Any
) -> None:
    env, client = bucket
    shards = manifest(built, "shards")
    doc = json.loads(shards.read_text())
    listed = [s["name"] for s in doc["shards"]] + ([doc["audit"]["name"]] if "audit" in doc else [])
    done = run_corpus("publish", shards.parent, "s3://pub/tiny/shards", env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["uploaded"] == result["files"] + 1 == len(listed) + 1  # and the manifest
    assert "tiny/shards/_MANIFEST.json" in keys(client, "tiny/shards/")
    assert run_corpus("verify", "s3://pub/tiny/shards", env=env).returncode == 0
    name = listed[0]
    body = client.get_object(Bucket="pub", Key=f"tiny/shards/{name}")["Body"].read()
    client.put_object(Bucket="pub", Key=f"tiny/shards/{name}", Body=bytes([body[0] ^ 1]) + body[1:])
    bad = run_corpus("verify", "s3://pub/tiny/shards", env=env)
    assert bad.returncode == 65, bad.stderr
    assert f"tiny/shards/{name}: sha256 differs from the manifest" in bad.stderr


def test_a_rerun_uploads_only_what_is_missing_or_wrong(built: Path, bucket: Any) -> None:
    env, client = bucket
    tokens = manifest(built, "tokens")
    first = json.loads(run_corpus("publish", tokens, "s3://pub/t", env=env, check=True).stdout)
    files = sorted(f["name"] for f in json.loads(tokens.read_text())["files"])
    client.delete_object(Bucket="pub", Key=f"t/{files[0]}")
    client.put_object(Bucket="pub", Key=f"t/{files[1]}", Body=b"not the file")
    again = run_corpus("publish", tokens, "s3://pub/t", env=env)
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    assert (first["uploaded"], second["uploaded"], second["skipped"]) == (
        len(files) + 1,
        2,
        len(files) - 2,
    )
    assert f"uploading {files[0]}" in again.stderr and f"uploading {files[1]}" in again.stderr
    assert run_corpus("verify", "s3://pub/t", env=env).returncode == 0


def test_an_unverified_build_or_a_prefix_holding_another_build_is_refused(
    built: Path, bucket: Any, tmp_path: Path
) -> None:
    env, client = bucket
    copy = tmp_path / "copy"
    shards = manifest(built, "shards")
    copy.mkdir()
    for f in shards.parent.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    doc = json.loads((copy / "_MANIFEST.json").read_text())
    victim = copy / doc["shards"][0]["name"]
    victim.write_bytes(victim.read_bytes()[:-1] + b"\0")
    done = run_corpus("publish", copy, "s3://pub/bad", env=env)
    assert done.returncode == 65, done.stderr
    assert "only a verified build is published" in done.stderr
    assert keys(client, "bad/") == []  # nothing went up
    run_corpus("publish", manifest(built, "tokens"), "s3://pub/one", env=env, check=True)
    other = run_corpus("publish", shards, "s3://pub/one", env=env)
    assert other.returncode == 65 and "already holds another build" in other.stderr


def test_a_task_snapshot_is_published_and_verified(bucket: Any, tmp_path: Path) -> None:
    env, client = bucket
    job = tmp_path / "job"
    run_corpus("tasks", "--config", TASKS, "--output", job, check=True, env={"HF_HUB_OFFLINE": "1"})
    done = run_corpus("publish", job, "s3://pub/tasks/arith", env=env)
    assert done.returncode == 0, done.stderr
    assert "manifest.json" in [k.rsplit("/", 1)[1] for k in keys(client, "tasks/arith/")]
    ok = run_corpus("verify", "s3://pub/tasks/arith", env=env)
    assert ok.returncode == 0, ok.stderr
    client.delete_object(Bucket="pub", Key="tasks/arith/train.jsonl")
    gone = run_corpus("verify", "s3://pub/tasks/arith", env=env)
    assert gone.returncode == 65 and "tasks/arith/train.jsonl: missing" in gone.stderr


def outside_build(built: Path, box: Path, form: str) -> tuple[Path, str]:
    """A verified copy of the shards build whose manifest names its first shard outside the
    folder (`form`: "parent", "nested" or "absolute"); the copy and that name."""
    copy = box / "src" / "copy"
    shutil.copytree(manifest(built, "shards").parent, copy)
    (copy / "sub").mkdir()
    doc = json.loads((copy / "_MANIFEST.json").read_text())
    shard = doc["shards"][0]["name"]
    moved = (copy / shard).rename(box / "src" / shard)
    name = {"parent": f"../{shard}", "nested": f"sub/../../{shard}", "absolute": str(moved)}[form]
    doc["shards"][0]["name"] = name
    (copy / "_MANIFEST.json").write_text(json.dumps(doc, indent=1))
    assert run_corpus("verify", copy).returncode == 0  # on disk, the file is where it says
    return copy, name


def tree(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("form", ["parent", "nested", "absolute"])
def test_a_manifest_naming_a_file_outside_its_folder_is_refused_before_anything_is_written(
    built: Path, bucket: Any, tmp_path: Path, form: str
) -> None:
    env, client = bucket
    copy, name = outside_build(built, tmp_path / "box", form)
    (tmp_path / "box" / "pub" / "dest").mkdir(parents=True)
    before = tree(tmp_path / "box")
    for url in ("s3://pub/conf/build", str(tmp_path / "box" / "pub" / "dest")):
        done = run_corpus("publish", copy, url, env=env)
        assert done.returncode == 65, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and f"file name {name!r} is not inside the build folder" in lines[0]
    assert keys(client, "") == []  # nothing uploaded, in the prefix or beside it
    assert tree(tmp_path / "box") == before  # nothing written, in the folder or beside it


def test_verify_refuses_a_published_manifest_naming_a_file_outside_its_prefix(
    built: Path, bucket: Any
) -> None:
    env, client = bucket
    run_corpus("publish", manifest(built, "shards"), "s3://pub/v/build", env=env, check=True)
    doc = json.loads(client.get_object(Bucket="pub", Key="v/build/_MANIFEST.json")["Body"].read())
    shard = doc["shards"][0]["name"]
    client.copy_object(Bucket="pub", Key=f"v/{shard}", CopySource=f"pub/v/build/{shard}")
    doc["shards"][0]["name"] = f"../{shard}"
    client.put_object(Bucket="pub", Key="v/build/_MANIFEST.json", Body=json.dumps(doc).encode())
    done = run_corpus("verify", "s3://pub/v/build", env=env)
    assert done.returncode == 65, done.stderr
    assert f"file name '../{shard}' is not inside the build folder" in done.stderr


class _Stripping(http.server.BaseHTTPRequestHandler):
    """Forwards each request to `upstream` without its If-None-Match header: an S3-compatible
    store that ignores conditional writes."""

    protocol_version = "HTTP/1.1"
    upstream = ""
    stripped = 0

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() != "if-none-match"}
        _Stripping.stripped += len(self.headers) - len(headers)
        conn = http.client.HTTPConnection(urlsplit(self.upstream).netloc, timeout=30)
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        self.send_response(resp.status)
        length = resp.getheader("Content-Length") if self.command == "HEAD" else None
        for key, value in resp.getheaders():
            if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(key, value)
        self.send_header("Content-Length", length or str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        conn.close()

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.mark.timeout(120)
def test_a_store_that_ignores_if_none_match_is_refused(built: Path, bucket: Any) -> None:
    env, client = bucket
    _Stripping.upstream = env["AWS_ENDPOINT_URL"]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stripping)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        proxied = {**env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{server.server_port}"}
        done = run_corpus("publish", manifest(built, "shards"), "s3://pub/lax", env=proxied)
    finally:
        server.shutdown()
    assert done.returncode == 64, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "the store ignores If-None-Match" in lines[0]
    assert _Stripping.stripped == 2  # both creates of the claim really lost their condition
    assert keys(client, "lax/") == ["lax/.publish-claim.json"]  # no data file went up


def test_a_prefix_left_by_an_interrupted_publish_takes_only_that_build(
    built: Path, bucket: Any
) -> None:
    env, client = bucket
    shards, tokens = manifest(built, "shards"), manifest(built, "tokens")
    run_corpus("publish", shards, "s3://pub/cut", env=env, check=True)
    client.delete_object(Bucket="pub", Key="cut/_MANIFEST.json")  # killed before its manifest
    other = run_corpus("publish", tokens, "s3://pub/cut", env=env)
    assert other.returncode == 65, other.stderr
    assert "s3://pub/cut is claimed by another build" in other.stderr
    assert len(other.stderr.strip().splitlines()) == 1  # nothing uploaded
    again = run_corpus("publish", shards, "s3://pub/cut", env=env)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["uploaded"] == 1  # the manifest alone
    assert run_corpus("verify", "s3://pub/cut", env=env).returncode == 0
