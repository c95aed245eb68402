"""An HTTP proxy on loopback in front of an S3 server (moto's), for faults the network or a
writer cause between a listing and a GET: each request is forwarded whole and its response
read whole, then

- `before_get(key, n)` runs before the n-th GET of an object (n from 1): e.g. replace the object
  on the server, as another writer would;
- `cut[(key, n)] = N` sends only the first N bytes of that GET's body (the full Content-Length
  announced) and closes the connection;
- `corrupt = (old, new, times)` replaces `old` by `new` (same length) in the next `times`
  object bodies that hold it: the bytes a faulty network or disk would give, under the object's
  true ETag.
- `ignore` names request headers the proxy drops before forwarding (e.g. `{"range"}`: every
  GET answered with the whole object, as a server that does not do ranges; `{"if-match"}`: a
  server that serves whatever the object holds now).

`gets` counts the GETs of each object, `corrupted`, `cuts` and `ignored` the faults really made.
"""

from __future__ import annotations

import http.client
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection"}


class S3Proxy:
    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.before_get: Callable[[str, int], None] | None = None
        self.cut: dict[tuple[str, int], int] = {}
        self.corrupt: tuple[bytes, bytes, int] | None = None
        self.ignore: set[str] = set()
        self.ignored = 0  # requests that had a header of `ignore` dropped
        self.gets: Counter[str] = Counter()
        self.corrupted = 0
        self.cuts = 0
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                proxy._forward(self)

            do_HEAD = do_PUT = do_POST = do_DELETE = do_GET

        return Handler

    def _object_get(self, handler: BaseHTTPRequestHandler) -> tuple[str, int] | None:
        """(key, n) when the request is the n-th GET of an object (not a listing)."""
        parts = urlsplit(handler.path)
        bucket_and_key = unquote(parts.path).lstrip("/").split("/", 1)
        if handler.command != "GET" or len(bucket_and_key) < 2 or "list-type" in parts.query:
            return None
        key = bucket_and_key[1]
        if not key:
            return None
        with self.lock:
            self.gets[key] += 1
            return key, self.gets[key]

    def _forward(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        target = self._object_get(handler)
        if target is not None and self.before_get is not None:
            self.before_get(*target)
        upstream = http.client.HTTPConnection(self.host, self.port, timeout=30)
        dropped = HOP | self.ignore
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in dropped}
        if any(k.lower() in self.ignore for k in handler.headers):
            with self.lock:
                self.ignored += 1
        upstream.request(handler.command, handler.path, body=body, headers=headers)
        resp = upstream.getresponse()
        data = resp.read()
        upstream.close()
        if target is not None:
            data = self._corrupted(data)
        handler.send_response_only(resp.status, resp.reason)
        head = handler.command == "HEAD"  # its Content-Length is the object's, not the body's
        for name, value in resp.getheaders():
            if name.lower() not in HOP and (head or name.lower() != "content-length"):
                handler.send_header(name, value)
        if not head:
            handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        cut = self.cut.get(target) if target is not None else None
        if cut is not None:
            with self.lock:
                self.cuts += 1
            handler.wfile.write(data[:cut])
            handler.wfile.flush()
            handler.close_connection = True
            return
        if not head:
            handler.wfile.write(data)

    def _corrupted(self, data: bytes) -> bytes:
        with self.lock:
            if self.corrupt is None or self.corrupt[2] <= 0 or self.corrupt[0] not in data:
                return data
            old, new, times = self.corrupt
            self.corrupt = (old, new, times - 1)
            self.corrupted += 1
        return data.replace(old, new, 1)


@contextmanager
def s3_proxy(upstream: str) -> Iterator[S3Proxy]:
    """An S3Proxy in front of `upstream` (an http:// endpoint), serving until the block ends."""
    proxy = S3Proxy(upstream)
    thread = threading.Thread(target=proxy.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.server.shutdown()
        proxy.server.server_close()
