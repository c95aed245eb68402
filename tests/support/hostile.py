"""A hostile HTTP mirror on loopback: one misbehaviour per URL path, over objects a test puts
and replaces, counting the requests and the body bytes it sends.

Paths (NAME is an object's name, `put` by the test):

- `/plain/NAME`: a correct server: Content-Length, ETag, Last-Modified, Range and If-Range.
- `/ignore-if-range/NAME`: honours Range but not If-Range: a ranged GET gets a 206 of the
  object there now, with its ETag, whatever If-Range said (a CDN that ignores it).
- `/no-length/NAME`: no Content-Length on HEAD or GET (close-delimited bodies); Range is
  honoured (a 206 whose Content-Range total is `*`, a 416 past the end).
- `/no-length-no-ranges/NAME`: no Content-Length, and every GET is a 200 of the whole object.
- `/no-ranges-cut/NAME`: every GET is a 200 of the whole object, cut after `cut_every` bytes.
- `/drip/NAME`: the right headers, then one byte every `drip_s` seconds.
- `/slow/NAME`: `rate` bytes a second.
- `/changes-between-head-and-get/NAME`: the first GET of NAME puts `next_version[NAME]` in its
  place before it answers (the object changed after the HEAD that listed it).
- `/redirect-loop`: a 302 to itself; `/redirect-file` and `/redirect-gopher`: a 302 to a
  `file://` or `gopher://` URL.

On any path, `cuts` (a list of byte counts) cuts the next GET bodies: each GET takes the first
entry and closes the connection after that many body bytes; `on_cut` is called after a cut
(e.g. to replace the object: "after a cut, the object changed").
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

EPOCH = 1_700_000_000


@dataclass(frozen=True)
class Version:
    """One version of an object: its bytes, ETag and Last-Modified."""

    data: bytes
    etag: str
    last_modified: str


class HostileMirror:
    """The server's state: objects by name, the behaviours' settings, what was sent."""

    def __init__(self) -> None:
        self.objects: dict[str, Version] = {}
        self.next_version: dict[str, bytes] = {}
        self.cuts: list[int] = []
        self.on_cut: Callable[[], None] | None = None
        self.cut_every = 100_000
        self.drip_s = 1.0
        self.rate = 200_000
        self.requests: Counter[str] = Counter()
        self.sent = 0
        self.cut = 0
        self.url = ""
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._puts = 0

    def put(self, name: str, data: bytes) -> Version:
        """Serve `data` as NAME from now on (a new ETag and Last-Modified)."""
        with self._lock:
            self._puts += 1
            version = Version(
                data,
                f'"{hashlib.sha256(data).hexdigest()[:16]}"',
                formatdate(EPOCH + 60 * self._puts, usegmt=True),
            )
            self.objects[name] = version
        return version

    def count(self, key: str) -> None:
        with self._lock:
            self.requests[key] += 1

    def add_sent(self, nbytes: int) -> None:
        with self._lock:
            self.sent += nbytes

    def take_cut(self) -> int | None:
        with self._lock:
            return self.cuts.pop(0) if self.cuts else None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads the counters."""

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self._answer(head=False)

    def _answer(self, head: bool) -> None:
        mirror = self.server.mirror
        self.close_connection = True
        kind, _, name = self.path.lstrip("/").partition("/")
        mirror.count(f"{self.command} /{kind}")
        redirect = {
            "redirect-loop": f"{mirror.url}/redirect-loop",
            "redirect-file": "file:///etc/passwd",
            "redirect-gopher": "gopher://127.0.0.1:70/1/corpus.jsonl",
        }.get(kind)
        if redirect is not None:
            self._status(302, {"Location": redirect, "Content-Length": "0"})
            return
        if kind == "changes-between-head-and-get" and not head and name in mirror.next_version:
            mirror.put(name, mirror.next_version.pop(name))
        version = mirror.objects.get(name)
        if version is None:
            self._status(404, {"Content-Length": "0"})
            return
        with contextlib.suppress(OSError):  # the client went away: it may
            self._send(kind, version, head)

    def _status(self, code: int, headers: dict[str, str]) -> None:
        self.send_response(code)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Connection", "close")
        self.end_headers()

    def _send(self, kind: str, version: Version, head: bool) -> None:
        data, size = version.data, len(version.data)
        lengthless = kind.startswith("no-length")
        ranges = kind not in ("no-length-no-ranges", "no-ranges-cut")
        start = self._range_start(version, honour_if_range=kind != "ignore-if-range")
        headers = {"ETag": version.etag, "Last-Modified": version.last_modified}
        if ranges:
            headers["Accept-Ranges"] = "bytes"
        if start is not None and ranges:
            if start >= size:
                self._status(416, {**headers, "Content-Range": f"bytes */{size}"})
                return
            total = "*" if lengthless else str(size)
            headers["Content-Range"] = f"bytes {start}-{size - 1}/{total}"
            code, body = 206, data[start:]
        else:
            code, body = 200, data
        if not lengthless:
            headers["Content-Length"] = str(len(body))
        self._status(code, headers)
        if head:
            return
        self._body(kind, body)

    def _range_start(self, version: Version, honour_if_range: bool) -> int | None:
        """The first byte a `Range: bytes=N-` asks for; None for the whole object."""
        match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", "").strip())
        if match is None:
            return None
        validator = self.headers.get("If-Range")
        if honour_if_range and validator and validator not in (version.etag, version.last_modified):
            return None
        return int(match.group(1))

    def _body(self, kind: str, body: bytes) -> None:
        mirror = self.server.mirror
        cut = mirror.take_cut()
        if kind == "no-ranges-cut":
            cut = mirror.cut_every
        if cut is not None and cut < len(body):
            self._write(body[:cut], kind)
            mirror.cut += 1
            self.connection.shutdown(socket.SHUT_RDWR)  # the connection breaks here
            if mirror.on_cut is not None:
                mirror.on_cut()
            return
        self._write(body, kind)

    def _write(self, body: bytes, kind: str) -> None:
        mirror = self.server.mirror
        if kind == "drip":
            for i in range(len(body)):
                if mirror.stopping.wait(mirror.drip_s):
                    return
                self.wfile.write(body[i : i + 1])
                mirror.add_sent(1)
            return
        step = max(mirror.rate // 10, 1) if kind == "slow" else 1 << 16
        for i in range(0, len(body), step):
            if kind == "slow" and mirror.stopping.wait(0.1):
                return
            self.wfile.write(body[i : i + step])
            mirror.add_sent(len(body[i : i + step]))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    mirror: HostileMirror

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet: a client that hangs up mid-body is what these tests do."""


@contextmanager
def hostile_mirror() -> Iterator[HostileMirror]:
    """A hostile mirror on a free loopback port (its `url`), stopped at the end."""
    mirror = HostileMirror()
    server = _Server(("127.0.0.1", 0), _Handler)
    server.mirror = mirror
    mirror.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield mirror
    finally:
        mirror.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
