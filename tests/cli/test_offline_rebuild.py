"""A finished build of a remote source rebuilds offline: the fetch uses the raw cache without
asking the server, so a mirror that is down, or whose ETag changes on every answer (CDN nodes
that disagree), never fails a rebuild. Checking the server for a new version is explicit:
`--refresh`."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from support.corpus import own_instance_env, run_corpus
from support.mirrors import nginx
from test_remote_sources import config, fetch, raw_docs, write_docs


@contextmanager
def flapping_etag(file: Path) -> Iterator[tuple[str, list[str]]]:
    """An HTTP server for `file` whose ETag is new on every answer; yields its URL and the
    request lines it answered."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, body: bool) -> None:
            seen.append(self.requestline)
            data = file.read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("ETag", f'"{len(seen)}-{time.monotonic_ns()}"')
            self.end_headers()
            if body:
                self.wfile.write(data)

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def do_GET(self) -> None:
            self._answer(body=True)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{file.name}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_a_fetched_source_whose_etag_flaps_is_reused_and_refresh_names_the_change(
    tmp_path: Path,
) -> None:
    file = write_docs(tmp_path / "served" / "web.jsonl", mb=0.2)
    root = tmp_path / "data"
    with flapping_etag(file) as (url, seen):
        cfg = config(tmp_path, url)
        first = fetch(cfg, root)
        assert first.returncode == 0, first.stderr
        asked = len(seen)
        before = raw_docs(root)
        for _ in range(2):  # the ETag differs on every answer: never asked again
            again = fetch(cfg, root)
            assert again.returncode == 0, again.stderr
            assert "already in raw/" in again.stderr
        assert len(seen) == asked
        refreshed = fetch(cfg, root, flags=("--refresh",))
        assert len(seen) > asked  # the server was asked, and said another ETag
    assert refreshed.returncode == 65, refreshed.stderr
    (line,) = refreshed.stderr.strip().splitlines()
    assert "changed since it was fetched" in line
    assert raw_docs(root) == before


@pytest.mark.timeout(600)
def test_a_built_config_builds_again_with_its_mirror_down(tmp_path: Path) -> None:
    served, root = tmp_path / "served", tmp_path / "data"
    write_docs(served / "web.jsonl", mb=0.3)
    with nginx(served, tmp_path / "nginx") as base:
        cfg = config(tmp_path, f"{base}/web.jsonl")
        built = run_corpus("build", cfg, "--root", root, environ=own_instance_env())
        assert built.returncode == 0, built.stderr
    # nginx is stopped: nothing listens on its port any more
    started = time.monotonic()
    again = run_corpus("build", cfg, "--root", root, environ=own_instance_env(), timeout=300)
    assert again.returncode == 0, again.stderr
    assert time.monotonic() - started < 120, "an offline rebuild waited on the network"
    first, second = json.loads(built.stdout), json.loads(again.stdout)
    assert second["partition_key"] == first["partition_key"]
    refreshed = run_corpus(
        "run", "--stage", "fetch", "--config", cfg, "--root", root, "--refresh",
        env={"CORPUS_FETCH_BACKOFF_S": "0.01"}, timeout=300,
    )  # fmt: skip
    assert refreshed.returncode == 75, refreshed.stderr  # asked, and nothing answered
    assert "cannot connect" in refreshed.stderr.strip().splitlines()[-1]
