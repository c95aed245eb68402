"""A Hugging Face Hub on loopback for `hf://` sources: a folder served as dataset repositories
through the Hub's HTTP API, as far as `huggingface_hub`'s HfFileSystem uses it to list, stat and
read files (repo info, tree, paths-info, resolve with ranges). The client code under test is the
real one; only the server is ours, because the Hub cannot be reached from here.

    with hub(folder) as endpoint:      # folder/OWNER/NAME/... is the repo OWNER/NAME
        env = {"HF_ENDPOINT": endpoint, "HF_HUB_OFFLINE": "0"}

A file's `oid` is the git blob id of its bytes, so a changed file is a new identity, as on the
Hub. `requests` counts the requests per path kind.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

COMMIT = "0123456789abcdef0123456789abcdef01234567"
_REPO = r"(?P<repo>[^/]+/[^/]+)"
_REV = r"(?P<rev>[^/]+)"
ROUTES = (
    ("info", re.compile(rf"^/api/datasets/{_REPO}(?:/revision/{_REV})?$")),
    ("tree", re.compile(rf"^/api/datasets/{_REPO}/tree/{_REV}(?:/(?P<path>.*))?$")),
    ("paths-info", re.compile(rf"^/api/datasets/{_REPO}/paths-info/{_REV}$")),
    ("resolve", re.compile(rf"^/datasets/{_REPO}/resolve/{_REV}/(?P<path>.+)$")),
)


def blob_id(data: bytes) -> str:
    """git's blob id of `data` (what the Hub calls a file's oid)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Hub:
    folder: Path
    endpoint: str = ""
    requests: Counter[str] = field(default_factory=Counter)

    def repo(self, repo: str) -> Path | None:
        path = self.folder / repo
        return path if path.is_dir() else None

    def entry(self, root: Path, path: Path) -> dict[str, Any]:
        rel = path.relative_to(root).as_posix()
        if path.is_dir():
            return {"type": "directory", "oid": blob_id(rel.encode()), "size": 0, "path": rel}
        data = path.read_bytes()
        return {"type": "file", "oid": blob_id(data), "size": len(data), "path": rel}


class _Handler(BaseHTTPRequestHandler):
    hub: Hub

    def log_message(self, *_: Any) -> None:  # quiet
        pass

    def _route(self) -> tuple[str, dict[str, str], dict[str, list[str]]] | None:
        parts = urlsplit(self.path)
        for name, pattern in ROUTES:
            match = pattern.match(unquote(parts.path))
            if match:
                self.hub.requests[name] += 1
                groups = {k: v for k, v in match.groupdict().items() if v is not None}
                return name, groups, parse_qs(parts.query)
        return None

    def _json(self, status: int, body: Any, head: bool = False) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status >= 400:
            self.send_header("X-Error-Code", "RepoNotFound" if status == 404 else "Error")
            self.send_header("X-Error-Message", str(body.get("error", "")))
        self.end_headers()
        if not head:
            self.wfile.write(data)

    def _missing(self, what: str, head: bool = False) -> None:
        self.send_response(404)
        self.send_header("X-Error-Code", "EntryNotFound")
        self.send_header("X-Error-Message", f"{what} does not exist")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self._get(head=False)

    def do_HEAD(self) -> None:
        self._get(head=True)

    def _get(self, head: bool) -> None:
        routed = self._route()
        if routed is None:
            return self._json(404, {"error": "no such route"}, head)
        name, groups, query = routed
        root = self.hub.repo(groups["repo"])
        if root is None:
            return self._json(404, {"error": "Repository not found"}, head)
        if name == "info":
            return self._json(200, {"id": groups["repo"], "sha": COMMIT, "private": False}, head)
        if name == "tree":
            base = root / groups.get("path", "")
            if not base.is_dir():
                return self._missing(groups.get("path", ""), head)
            recursive = query.get("recursive", ["False"])[0].lower() == "true"
            found = sorted(base.rglob("*") if recursive else base.iterdir())
            return self._json(200, [self.hub.entry(root, p) for p in found], head)
        if name == "resolve":
            return self._resolve(root / groups["path"], groups["path"], head)
        return self._json(405, {"error": "use POST"}, head)

    def _resolve(self, path: Path, rel: str, head: bool) -> None:
        if not path.is_file():
            return self._missing(rel, head)
        data = path.read_bytes()
        start, end = 0, len(data)
        ranged = re.match(r"bytes=(\d+)-(\d*)$", self.headers.get("Range", ""))
        if ranged:
            start = int(ranged.group(1))
            end = min(int(ranged.group(2)) + 1, len(data)) if ranged.group(2) else len(data)
        body = data[start:end]
        self.send_response(206 if ranged else 200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{blob_id(data)}"')
        self.send_header("X-Repo-Commit", COMMIT)
        if ranged:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def do_POST(self) -> None:
        routed = self._route()
        if routed is None or routed[0] != "paths-info":
            return self._json(404, {"error": "no such route"})
        _, groups, _ = routed
        root = self.hub.repo(groups["repo"])
        if root is None:
            return self._json(404, {"error": "Repository not found"})
        length = int(self.headers.get("Content-Length", "0"))
        form = parse_qs(self.rfile.read(length).decode())
        paths = form.get("paths", [])
        found = [self.hub.entry(root, root / p) for p in paths if (root / p).exists()]
        return self._json(200, found)


@contextmanager
def hub(folder: Path) -> Iterator[Hub]:
    """The Hub on a free loopback port, serving `folder`; stopped on exit."""
    state = Hub(folder)
    handler = type("Handler", (_Handler,), {"hub": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    state.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
