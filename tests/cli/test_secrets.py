"""Secrets in URLs are written nowhere: a source URL with a token and a signature in its query is
built (`corpus build`, a real Dagster instance under the root) from nginx on loopback and
published to moto's S3 server, then every file under the data root (Dagster's SQLite storage
included), every published object and everything printed is searched for the secrets. The
fetch really sent them (nginx's access log), the partition is the one `corpus hash` names, and
a second build fetches nothing. A calibrator base URL with a password or a key is refused."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.corpus import own_instance_env, run_corpus
from support.mirrors import build_manifest, nginx, s3_client, s3_server
from support.processes import stop_group
from support.servers import free_port
from support.waiting import wait_for

from corpus_assets.core.secrets import digest_mask, mask_data, mask_text, mask_url

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "examples" / "tiny" / "docs.jsonl"
TOKEN = "S3CRETtok3n-9f8e7d6c5b4a"
SIGNATURE = "SIGabcdef0123456789fedcba"
SECRETS = (TOKEN, SIGNATURE)


def leaks(data: bytes | str) -> list[str]:
    """The secrets found in `data`."""
    text = data if isinstance(data, str) else data.decode("latin-1")
    return [s for s in SECRETS if s in text]


def files_with_secrets(folder: Path) -> list[str]:
    return sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and leaks(p.read_bytes())
    )


def config_text(url: str) -> str:
    return (
        'dataset = "secret"\nversion = "v1"\n[tokenizer]\nid = "bytes"\n'
        f'[[sources]]\nname = "web"\nkind = "jsonl"\npath = "{url}"\nid_field = "id"\n'
        'license = "cc0-1.0"\n[shards]\ntarget_mb = 0.05\n'
    )


def gets(access_log: Path) -> list[str]:
    return [line for line in access_log.read_text().splitlines() if '"GET /docs.jsonl' in line]


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """nginx serving the example's documents (it ignores the query); its base URL and log."""
    served = tmp_path / "served"
    served.mkdir()
    shutil.copy(TINY, served / "docs.jsonl")
    with nginx(served, tmp_path / "nginx") as base:
        yield base, tmp_path / "nginx" / "access.log"


def test_the_mask_is_a_digest_prefix_that_tells_two_secrets_apart() -> None:
    url = f"https://h:8443/a.jsonl?token={TOKEN}&X-Amz-Signature={SIGNATURE}&bare"
    masked = mask_url(url)
    token = "<sha256:" + hashlib.sha256(TOKEN.encode()).hexdigest()[:12] + ">"
    assert masked == (
        f"https://h:8443/a.jsonl?token={token}&X-Amz-Signature={digest_mask(SIGNATURE)}"
        f"&{digest_mask('bare')}"
    )
    assert mask_url(masked) == masked and mask_text(masked) == masked
    assert mask_url("https://alice:hunter2@h/a") == f"https://alice:{digest_mask('hunter2')}@h/a"
    assert mask_url("s3://bucket/a/*.jsonl") == "s3://bucket/a/*.jsonl"
    line = f"GET {url} failed; see also http://x/y?k=1."
    assert leaks(mask_text(line)) == [] and mask_text(line).startswith(f"GET {masked} failed")
    assert mask_data({"a": [url, 1, None]}) == {"a": [masked, 1, None]}
    assert digest_mask("one") != digest_mask("two")


def test_a_url_urlsplit_refuses_is_masked_by_its_shape_and_a_template_is_kept() -> None:
    assert mask_url("http://u:hunter2@[zz/x?k=v") == (
        f"http://u:{digest_mask('hunter2')}@[zz/x?k={digest_mask('v')}"
    )
    template = "postgresql+psycopg2://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
    line = f"--instance: not a database URL; expected {template}"
    assert mask_text(line) == line  # `[` cannot be in a password: no secret there


@pytest.mark.timeout(420)
def test_a_url_secret_is_nowhere_under_the_root_in_dagster_or_in_the_published_prefix(
    tmp_path: Path, mirror: tuple[str, Path]
) -> None:
    base, access_log = mirror
    url = f"{base}/docs.jsonl?token={TOKEN}&X-Amz-Signature={SIGNATURE}"
    cfg = tmp_path / "config" / "secret.toml"
    cfg.parent.mkdir()
    cfg.write_text(config_text(url))
    root = tmp_path / "data"
    with s3_server(tmp_path / "s3") as env:
        client = s3_client(env)
        client.create_bucket(Bucket="pub")
        environ = {**own_instance_env(), **env, "CORPUS_FETCH_BACKOFF_S": "0.05"}
        shown = run_corpus("hash", "--json", cfg, environ=environ, check=True)
        first = run_corpus(
            "build", cfg, "--root", root, "--publish", "s3://pub/secret", environ=environ
        )
        assert first.returncode == 0, first.stderr
        manifest = build_manifest(root, "shards")
        written = {p: p.stat().st_mtime_ns for p in (manifest, *root.glob("raw/*/_SOURCE.json"))}
        again = run_corpus("build", cfg, "--root", root, environ=environ)
        assert again.returncode == 0, again.stderr
        published = {
            o["Key"]: client.get_object(Bucket="pub", Key=o["Key"])["Body"].read()
            for o in client.list_objects_v2(Bucket="pub")["Contents"]
        }
    assert len(gets(access_log)) == 1 and TOKEN in gets(access_log)[0]  # the real URL, once
    assert {p: p.stat().st_mtime_ns for p in written} == written  # the second build: cached
    identity = json.loads(shown.stdout)
    as_written = json.dumps(
        {
            "dataset": "secret",
            "shards": {"target_mb": 0.05},
            "sources": [
                {"id_field": "id", "kind": "jsonl", "license": "cc0-1.0", "name": "web"}
                | {"path": url}
            ],
            "tokenizer": {"id": "bytes"},
            "version": "v1",
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    assert identity["sha256"] == hashlib.sha256(as_written.encode()).hexdigest()
    assert identity["canonical"] == mask_text(as_written)
    summary = json.loads(first.stdout)
    assert summary["partition_key"] == identity["partition_key"]
    assert json.loads(again.stdout)["partition_key"] == identity["partition_key"]
    (record,) = root.glob("raw/*/_SOURCE.json")
    assert json.loads(record.read_text())["spec"]["path"] == mask_url(url)
    assert any(k.endswith("/_MANIFEST.json") for k in published)
    assert (root / "dagster").is_dir() and list(root.glob("corpus/**/REPORT.md"))
    assert files_with_secrets(root) == []
    assert [k for k, body in published.items() if leaks(body)] == []
    printed = shown.stdout + shown.stderr + first.stdout + first.stderr
    assert leaks(printed + again.stdout + again.stderr) == []


@pytest.mark.timeout(300)
def test_a_registered_config_whose_file_changed_is_refused_in_one_line(
    tmp_path: Path, mirror: tuple[str, Path]
) -> None:
    base, access_log = mirror
    cfg = tmp_path / "secret.toml"
    cfg.write_text(config_text(f"{base}/docs.jsonl?token={TOKEN}"))
    root = tmp_path / "data"
    environ = own_instance_env()
    done = run_corpus("register", cfg, "--root", root, environ=environ, check=True)
    (registered,) = root.glob("configs/*[0-9a-f].json")
    assert leaks(registered.read_text() + done.stdout + done.stderr) == []
    cfg.write_text(config_text(f"{base}/docs.jsonl?token={TOKEN}-rotated"))
    fetch = ("run", "--stage", "fetch", "--config", registered, "--root", root)
    changed = run_corpus(*fetch, environ=environ)
    assert changed.returncode == 64, changed.stderr
    assert f"{cfg} changed since it was registered as {registered.stem}" in changed.stderr
    assert len(changed.stderr.strip().splitlines()) == 1 and leaks(changed.stderr) == []
    assert gets(access_log) == [] and list(root.glob("raw/*/_SOURCE.json")) == []
    cfg.unlink()
    gone = run_corpus(*fetch, environ=environ)
    assert gone.returncode == 64, gone.stderr
    assert "config file not found" in gone.stderr and "register the config again" in gone.stderr


class ModelServer:
    """tests/support/openai_server.py on loopback, in a session of its own."""

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        with open(log, "w", encoding="utf-8") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(REPO / "tests/support/openai_server.py"), "--port",
                 str(self.port)],
                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
            )  # fmt: skip
        wait_for(lambda: self.stats() is not None, 30, "the model server", watch=[self.proc])

    def stats(self) -> dict[str, Any] | None:
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=5) as a:
                doc: dict[str, Any] = json.load(a)
        except OSError:
            return None
        return doc


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "form", ["http://alice:{s}@127.0.0.1:{p}/v1", "http://127.0.0.1:{p}/v1?api-key={s}"]
)
def test_a_calibrator_base_url_with_a_password_or_key_is_refused_in_one_line(
    tmp_path: Path, form: str
) -> None:
    server = ModelServer(tmp_path / "server.log")
    try:
        url = form.format(s=TOKEN, p=server.port)
        job = tmp_path / "job.json"
        params = {
            "base_url": url,
            "model": "test-model",
            "harness_ref": "h",
            "verifier_digest": "v",
        }
        calibration = {
            "implementation": "corpus_assets.calibrators.openai:live_responses",
            "repeats": 2,
            "params": params,
        }
        job.write_text(
            json.dumps(
                {
                    "recipe": "live_recipe:make",
                    "target_count": 4,
                    "purpose": "model",
                    "params": {"batches": [["right"] * 4]},
                    "calibration": calibration,
                    "execution": {"batch_size": 4},
                }
            )
        )
        tasks = REPO / "tests" / "tasks"
        environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(tasks)])}
        out = run_corpus("tasks", "--config", job, "--output", tmp_path / "out", environ=environ)
        stats = server.stats()
    finally:
        stop_group(server.proc, grace=5)
    assert out.returncode == 64, out.stderr
    assert "base_url has a user, password or query string in it" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert leaks(out.stdout + out.stderr) == [] and not (tmp_path / "out").exists()
    assert stats is not None and stats["models"] == stats["chat"] == 0
