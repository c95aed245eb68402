"""Remote sources against real servers on loopback: nginx behind a proxy that cuts, stalls and
answers 503, moto's S3 server, and a Hub API of our own for `hf://` (tests/support/hub.py; the
client is huggingface_hub's real HfFileSystem). Each test compares what a remote fetch put in
the raw cache (or the shards) with the same file read from disk, and shows its fault happened:
the proxy counts the connections it cut and the bytes it passed on; a killed fetch is really
gone."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import zstandard
from support.corpus import run_corpus, start_corpus
from support.hub import blob_id, hub
from support.mirrors import FaultProxy, build_manifest, fault_proxy, nginx, s3_server
from support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "examples" / "tiny" / "docs.jsonl"
LETTERS = bytes((97 + b % 26) if b % 32 < 26 else 32 for b in range(256))  # a-z and spaces
FAST = {"CORPUS_FETCH_BACKOFF_S": "0.05", "HF_HUB_OFFLINE": "1"}


def write_docs(path: Path, mb: float, seed: int = 0) -> Path:
    """JSONL documents of random letters and spaces, about `mb` MB before compression (gzip, at
    level 1, when the name ends .gz: about 1.6 times smaller)."""
    rng = random.Random(seed)
    text = rng.randbytes(int(mb * 1e6)).translate(LETTERS).decode("ascii")
    lines, pos = [], 0
    while pos < len(text):
        size = rng.randint(400, 3000)
        lines.append(json.dumps({"id": f"d{len(lines):07d}", "text": text[pos : pos + size]}))
        pos += size
    data = ("\n".join(lines) + "\n").encode("ascii")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data, compresslevel=1) if path.suffix == ".gz" else data)
    return path


def config(folder: Path, path: str, name: str = "web", pin: str | None = None) -> Path:
    out = folder / f"{name}-{hashlib.sha256(f'{path} {pin}'.encode()).hexdigest()[:8]}.json"
    pinned = {"sha256": pin} if pin else {}
    out.write_text(
        json.dumps(
            {
                "dataset": "remote",
                "version": "v1",
                "tokenizer": {"id": "bytes"},
                "sources": [
                    {
                        "name": name,
                        "kind": "jsonl",
                        "path": path,
                        "id_field": "id",
                        "license": "cc0-1.0",
                        **pinned,
                    }
                ],
            }
        ),
        encoding="utf-8",
    )
    return out


def fetch(
    cfg: Path, root: Path, env: dict[str, str] | None = None, flags: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    return run_corpus(
        "run",
        "--stage",
        "fetch",
        "--config",
        cfg,
        "--root",
        root,
        *flags,
        env={**FAST, **(env or {})},
    )


def raw_docs(root: Path) -> list[tuple[str, str]]:
    """(id, text) of every document in the raw cache's one source, in order."""
    (record_path,) = root.glob("raw/*/_SOURCE.json")
    record = json.loads(record_path.read_text(encoding="utf-8"))
    docs: list[tuple[str, str]] = []
    for part in record["files"]:
        table = pq.read_table(record_path.parent / part["name"], columns=["id", "text"])
        docs += zip(table.column("id").to_pylist(), table.column("text").to_pylist(), strict=True)
    return docs


def shard_docs(cfg: Path, root: Path, env: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """Fetch and shard `cfg` into `root`: (id, text) of every document in its shards, in order."""
    for stage in ("fetch", "shard"):
        done = run_corpus(
            "run", "--stage", stage, "--config", cfg, "--root", root, env={**FAST, **(env or {})}
        )
        assert done.returncode == 0, done.stderr
    docs: list[tuple[str, str]] = []
    for shard in sorted(build_manifest(root, "shards").parent.glob("*.parquet")):
        table = pq.read_table(shard, columns=["id", "text"])
        docs += zip(table.column("id").to_pylist(), table.column("text").to_pylist(), strict=True)
    assert docs
    return docs


def source_record(root: Path) -> dict[str, Any]:
    (record_path,) = root.glob("raw/*/_SOURCE.json")
    return dict(json.loads(record_path.read_text(encoding="utf-8")))


def local_docs(tmp_path: Path, file: Path) -> list[tuple[str, str]]:
    root = tmp_path / f"local-{file.name}-{file.stat().st_mtime_ns}"
    done = fetch(config(tmp_path, str(file), "local"), root)
    assert done.returncode == 0, done.stderr
    return raw_docs(root)


@pytest.fixture
def mirror(tmp_path: Path) -> Any:
    served = tmp_path / "served"
    served.mkdir()
    with nginx(served, tmp_path / "nginx") as base, fault_proxy(base) as proxy:
        yield served, proxy


def test_a_source_through_five_cut_connections_is_byte_identical_and_fetched_once(
    tmp_path: Path, mirror: tuple[Path, FaultProxy]
) -> None:
    served, proxy = mirror
    file = write_docs(served / "web.jsonl.gz", mb=80)
    size = file.stat().st_size
    assert size > 45e6
    proxy.plan = [("cut", 8e6)] * 5
    root = tmp_path / "data"
    done = fetch(config(tmp_path, f"{proxy.url}/web.jsonl.gz"), root)
    assert done.returncode == 0, done.stderr
    assert proxy.faults == 5 and proxy.connections >= 6  # five cuts, then a whole connection
    assert proxy.sent < 1.5 * size, (proxy.sent, size)
    record = source_record(root)
    assert record["remote"][0]["sha256"] == hashlib.sha256(file.read_bytes()).hexdigest()
    assert record["remote"][0]["url"] == f"{proxy.url}/web.jsonl.gz"
    assert raw_docs(root) == local_docs(tmp_path, file)
    assert not (root / "raw" / ".downloads").exists() or not any(
        (root / "raw" / ".downloads").rglob("*.part")
    )


def test_a_build_from_a_zst_behind_https_through_cut_connections_has_the_plain_files_shards(
    tmp_path: Path,
) -> None:
    served = tmp_path / "served"
    plain = write_docs(tmp_path / "plain" / "web.jsonl", mb=12, seed=4)
    packed = served / "web.jsonl.zst"
    served.mkdir()
    packed.write_bytes(zstandard.ZstdCompressor(level=3).compress(plain.read_bytes()))
    with nginx(served, tmp_path / "nginx", tls=True) as base, fault_proxy(base) as proxy:
        assert proxy.url.startswith("https://")
        proxy.plan = [("cut", 1e6)] * 3
        trust = {"REQUESTS_CA_BUNDLE": str(tmp_path / "nginx" / "cert.pem")}
        url = f"{proxy.url}/web.jsonl.zst"
        remote = shard_docs(config(tmp_path, url), tmp_path / "data", trust)
        assert proxy.faults == 3 and proxy.connections >= 4
        assert proxy.sent < 1.5 * packed.stat().st_size + 3e6, proxy.sent
        untrusted = fetch(config(tmp_path, url, "other"), tmp_path / "untrusted")
        assert untrusted.returncode == 64, untrusted.stderr
        (line,) = untrusted.stderr.strip().splitlines()
        assert f"{url}: the server's certificate is not trusted" in line
    assert remote == shard_docs(config(tmp_path, str(plain)), tmp_path / "local")


def kill_mid_download(cfg: Path, root: Path, after: int) -> int:
    """Start a fetch, SIGKILL it once its part file holds more than `after` bytes (it really
    dies, mid-download), and return how many bytes the part holds."""
    proc = start_corpus(
        "run", "--stage", "fetch", "--config", cfg, "--root", root, env=FAST,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip

    def part() -> Path | None:
        found = list(root.glob("raw/.downloads/*/*.part"))
        return found[0] if found and found[0].stat().st_size > after else None

    partial = wait_for(part, 120, f"a part file of more than {after:,} bytes", watch=[proc])
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    assert proc.stderr is not None
    proc.stderr.close()
    return partial.stat().st_size


def test_a_fetch_killed_mid_download_resumes_from_its_partial_bytes(
    tmp_path: Path, mirror: tuple[Path, FaultProxy]
) -> None:
    served, proxy = mirror
    file = write_docs(served / "web.jsonl", mb=24)
    size = file.stat().st_size
    proxy.rate = 4_000_000
    root, cfg = tmp_path / "data", config(tmp_path, f"{proxy.url}/web.jsonl")
    have = kill_mid_download(cfg, root, 6_000_000)
    assert 6_000_000 < have < size
    proxy.rate, proxy.sent = 0, 0
    done = fetch(cfg, root)
    assert done.returncode == 0, done.stderr
    assert f"resuming {proxy.url}/web.jsonl at byte {have:,}" in done.stderr
    assert size - have <= proxy.sent < size - have + 100_000, (proxy.sent, size, have)
    assert raw_docs(root) == local_docs(tmp_path, file)


def test_an_object_replaced_while_a_killed_fetch_was_down_is_fetched_again_whole(
    tmp_path: Path, mirror: tuple[Path, FaultProxy]
) -> None:
    served, proxy = mirror
    file = write_docs(served / "web.jsonl", mb=16, seed=1)
    proxy.rate = 4_000_000
    root, cfg = tmp_path / "data", config(tmp_path, f"{proxy.url}/web.jsonl")
    assert kill_mid_download(cfg, root, 4_000_000) < file.stat().st_size
    write_docs(file, mb=16, seed=2)  # the mirror now serves other bytes under the same name
    proxy.rate = 0
    done = fetch(cfg, root)
    assert done.returncode == 0, done.stderr
    assert raw_docs(root) == local_docs(tmp_path, file)  # the new object, not a mix


def test_an_object_that_changed_since_it_was_fetched_is_refused_by_a_refresh(
    tmp_path: Path, mirror: tuple[Path, FaultProxy]
) -> None:
    served, proxy = mirror
    file = write_docs(served / "web.jsonl", mb=0.2)
    root, cfg = tmp_path / "data", config(tmp_path, f"{proxy.url}/web.jsonl")
    assert fetch(cfg, root).returncode == 0
    before = raw_docs(root)
    unchanged = fetch(cfg, root, flags=("--refresh",))
    assert unchanged.returncode == 0, unchanged.stderr
    write_docs(file, mb=0.2, seed=3)
    connections = proxy.connections
    cached = fetch(cfg, root)  # the raw cache is used without asking the mirror
    assert cached.returncode == 0, cached.stderr
    assert proxy.connections == connections
    refreshed = fetch(cfg, root, flags=("--refresh",))
    assert refreshed.returncode == 65, refreshed.stderr
    assert proxy.connections > connections
    (line,) = refreshed.stderr.strip().splitlines()
    assert "changed since it was fetched" in line
    assert raw_docs(root) == before


def test_a_pinned_remote_source_is_checked_against_the_downloaded_bytes(
    tmp_path: Path, mirror: tuple[Path, FaultProxy]
) -> None:
    served, proxy = mirror
    file = write_docs(served / "web.jsonl", mb=0.3)
    digest, wrong = hashlib.sha256(file.read_bytes()).hexdigest(), "0" * 64
    root, url = tmp_path / "data", f"{proxy.url}/web.jsonl"
    refused = fetch(config(tmp_path, url, pin=wrong), root)
    assert refused.returncode == 65, refused.stderr
    line = refused.stderr.strip().splitlines()[-1]  # after the "downloading" progress line
    assert f"sha256 of {url} is {digest}, but the config pins {wrong}" in line
    assert not list(root.glob("raw/*/_SOURCE.json"))
    done = fetch(config(tmp_path, url, pin=digest), root)
    assert done.returncode == 0, done.stderr
    record = source_record(root)
    assert record["input_sha256"] == record["remote"][0]["sha256"] == digest
    assert raw_docs(root) == local_docs(tmp_path, file)


def test_not_found_and_forbidden_fail_at_once_with_one_line(
    tmp_path: Path, mirror: tuple[Path, FaultProxy]
) -> None:
    served, proxy = mirror
    (served / "private").mkdir()
    write_docs(served / "private" / "web.jsonl", mb=0.1)
    for path, code, words in (
        ("missing.jsonl", 65, "HTTP 404, not found"),
        ("private/web.jsonl", 64, "HTTP 403, access denied"),
    ):
        started = time.monotonic()
        done = fetch(config(tmp_path, f"{proxy.url}/{path}"), tmp_path / f"data-{code}")
        assert done.returncode == code, done.stderr
        assert time.monotonic() - started < 20
        (line,) = done.stderr.strip().splitlines()
        assert words in line and f"{proxy.url}/{path}" in line
        assert "Traceback" not in done.stderr


def test_a_503_and_a_stalled_connection_are_tried_again(
    tmp_path: Path, mirror: tuple[Path, FaultProxy]
) -> None:
    served, proxy = mirror
    file = write_docs(served / "web.jsonl", mb=0.5)
    proxy.plan = [("503", 1), ("stall", 6)]
    root = tmp_path / "data"
    done = fetch(
        config(tmp_path, f"{proxy.url}/web.jsonl"), root, env={"CORPUS_FETCH_TIMEOUT_S": "1"}
    )
    assert done.returncode == 0, done.stderr
    assert proxy.faults == 2
    assert "HTTP 503; trying again in 1.0 s" in done.stderr
    assert raw_docs(root) == local_docs(tmp_path, file)


def test_a_url_with_credentials_in_it_is_refused_without_showing_them(tmp_path: Path) -> None:
    cfg = config(tmp_path, "https://alice:hunter2@example.invalid/web.jsonl")
    done = fetch(cfg, tmp_path / "data")
    assert done.returncode == 64, done.stderr
    assert "credentials come from the environment" in done.stderr
    assert "hunter2" not in done.stderr


def _put(env: dict[str, str], files: dict[str, bytes], bucket: bool = True) -> None:
    """Create the bucket `corpora` (one request) and put each file (one request each)."""
    import botocore.session

    client = botocore.session.get_session().create_client(
        "s3",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        region_name="us-east-1",
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )
    if bucket:
        client.create_bucket(Bucket="corpora")
    for key, data in files.items():
        client.put_object(Bucket="corpora", Key=key, Body=data)


def test_an_s3_glob_source_gives_the_documents_of_the_same_local_files(tmp_path: Path) -> None:
    lines = TINY.read_bytes().splitlines(keepends=True)
    halves = {"web/part-0.jsonl": b"".join(lines[:150]), "web/part-1.jsonl": b"".join(lines[150:])}
    with s3_server(tmp_path / "s3") as env:
        _put(env, {**halves, "other/skip.jsonl": lines[0]})
        root = tmp_path / "data"
        cfg = config(tmp_path, "s3://corpora/web/part-*.jsonl")
        done = fetch(cfg, root, env)
        assert done.returncode == 0, done.stderr
        assert raw_docs(root) == local_docs(tmp_path, TINY)
        record = source_record(root)
        assert [r["name"] for r in record["remote"]] == ["part-0.jsonl", "part-1.jsonl"]
        assert all(r["etag"] for r in record["remote"])
        unchanged = fetch(cfg, root, env, flags=("--refresh",))
        assert unchanged.returncode == 0, unchanged.stderr
        _put(env, {"web/part-1.jsonl": halves["web/part-1.jsonl"] + lines[0]}, bucket=False)
        assert fetch(cfg, root, env).returncode == 0  # the raw cache, without asking
        again = fetch(cfg, root, env, flags=("--refresh",))
        assert again.returncode == 65 and "changed since it was fetched" in again.stderr
        missing = fetch(config(tmp_path, "s3://corpora/nothing-*.jsonl"), tmp_path / "d2", env)
        assert missing.returncode == 65 and "no objects match" in missing.stderr


def test_a_build_from_a_gz_in_s3_has_the_plain_files_shards(tmp_path: Path) -> None:
    plain = write_docs(tmp_path / "plain" / "web.jsonl", mb=2, seed=5)
    with s3_server(tmp_path / "s3") as env:
        _put(env, {"web/docs.jsonl.gz": gzip.compress(plain.read_bytes())})
        remote = shard_docs(config(tmp_path, "s3://corpora/web/docs.jsonl.gz"), tmp_path / "a", env)
    assert remote == shard_docs(config(tmp_path, str(plain)), tmp_path / "local")


def test_an_s3_source_with_refused_credentials_is_exit_64(tmp_path: Path) -> None:
    with s3_server(tmp_path / "s3", auth_after=2) as env:
        _put(env, {"web/part-0.jsonl": TINY.read_bytes()})  # the two unchecked requests
        done = fetch(config(tmp_path, "s3://corpora/web/part-0.jsonl"), tmp_path / "data", env)
        assert done.returncode == 64, done.stderr
        assert "credentials" in done.stderr and "testing" not in done.stderr


def test_an_hf_glob_source_gives_the_documents_of_the_same_local_file(tmp_path: Path) -> None:
    lines = TINY.read_bytes().splitlines(keepends=True)
    data = tmp_path / "hub" / "owner" / "web" / "data"
    data.mkdir(parents=True)
    halves = [gzip.compress(b"".join(lines[:150])), gzip.compress(b"".join(lines[150:]))]
    for k, half in enumerate(halves):
        (data / f"part-{k}.jsonl.gz").write_bytes(half)
    (data.parent / "README.md").write_text("a dataset card, not data\n", encoding="utf-8")
    with hub(tmp_path / "hub") as served:
        env = {"HF_ENDPOINT": served.endpoint, "HF_HUB_OFFLINE": "0"}
        root = tmp_path / "data"
        cfg = config(tmp_path, "hf://datasets/owner/web/data/*.jsonl.gz")
        done = fetch(cfg, root, env)
        assert done.returncode == 0, done.stderr
        assert raw_docs(root) == local_docs(tmp_path, TINY)
        record = source_record(root)["remote"]
        assert [r["name"] for r in record] == ["part-0.jsonl.gz", "part-1.jsonl.gz"]
        assert [r["etag"] for r in record] == [blob_id(h) for h in halves]
        assert [r["sha256"] for r in record] == [hashlib.sha256(h).hexdigest() for h in halves]
        assert served.requests["resolve"] >= 2  # the bytes came through the Hub's file route
        unchanged = fetch(cfg, root, env, flags=("--refresh",))
        assert unchanged.returncode == 0, unchanged.stderr
        (data / "part-1.jsonl.gz").write_bytes(gzip.compress(b"".join(lines[150:] + lines[:1])))
        again = fetch(cfg, root, env, flags=("--refresh",))
        assert again.returncode == 65 and "changed since it was fetched" in again.stderr
        gone = fetch(config(tmp_path, "hf://datasets/owner/none/*.jsonl"), tmp_path / "d2", env)
        assert gone.returncode == 65, gone.stderr
        assert len(gone.stderr.strip().splitlines()) == 1 and "owner/none" in gone.stderr
