"""Remote source files: `http(s)://`, `s3://` and `hf://` URLs, listed, downloaded resumably and
identified.

Listing. An `http(s)://` URL names one file (HTTP has no listing; a HEAD request gives its size,
ETag and Last-Modified). An `s3://BUCKET/KEY` or `hf://datasets/OWNER/NAME/FILE` URL may hold a
glob (`*`, `?`, `[`), matched on the store's listing as on disk; it goes through fsspec (s3fs,
huggingface_hub's HfFileSystem). The S3 endpoint is found the standard way
(`AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, the AWS config), and so are credentials: a URL with
a user or password in it is refused, and URLs are written to records and messages without their
query string.

Downloading. A file is downloaded to `NAME.part` in a folder of the raw cache that outlives a
killed fetch, with a sidecar `NAME.part.json` holding the identity of the bytes in the part:
the ETag, Last-Modified and size of the response that began them (not the listing's: an object
that changed between the listing and the download is kept as the new version, under its new
identity). Each try asks for the bytes from the end of the part on (HTTP `Range` with
`If-Range`, S3 and Hub ranged GETs), so a dropped connection or a killed fetch costs only the
bytes in flight. Every response is checked against the part's identity: a `206` with another
ETag, Last-Modified or total size (a server that ignores `If-Range`), or a range that does not
start at the part's end, starts the part again from byte 0; two versions are never spliced. A
body without Content-Length (close-delimited) is whole only when a ranged GET past its end is
answered `416`, or, from a server without Range support, when two whole reads agree (then its
size is unverified, said once, with the advice to pin a sha256). When all bytes are there, the
part is renamed (fsynced) to NAME and its identity kept in `NAME.identity.json` (with the size
and whether it was verified); `reusable` gives a finished download back only when that identity
is the listing's, and `discard` removes one whose bytes must not be reused. The download takes no
sha256: the fetch stage takes it from the finished file in a thread while it parses that file,
a core the download would otherwise share with the server and the socket. A progress line
(bytes, MB/s) goes to `note` at most every `RetryPolicy.progress_every_s` seconds: the stage's
heartbeat.

Errors. Connection resets, timeouts, HTTP 408/429/5xx (429 and 503 honour Retry-After, in
seconds or as a date) are tried again with exponential backoff. A try makes progress only with
bytes past the most the part has held (a server without Range support that cuts every response
makes none after the first), and a try that receives fewer than `stall_bytes` in a window of
`timeout_s` seconds (a mirror that drips) is given up as stalled and makes none; after
`RetryPolicy.tries` tries in a row without progress the fetch is TransientError (exit 75). 401
and 403 are ConfigError (exit 64: the credentials), and so is an HTTPS certificate that is not
trusted; 404, 410 and other 4xx, more than `max_redirects` redirects, and a redirect to a URL
that is not http(s) (`file://`, `gopher://`) are DataError (exit 65), each one line naming the
URL. The stage builds the RetryPolicy (`RetryPolicy.from_env` reads CORPUS_FETCH_BACKOFF_S and
CORPUS_FETCH_TIMEOUT_S) and passes it in.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from corpus_assets.core.errors import ConfigError, DataError, TransientError
from corpus_assets.core.store.atomic import fsync_dir, write_json

SCHEMES = ("http", "https", "s3", "hf")
CHUNK = 1 << 20
FSSPEC_BLOCK = 8 << 20  # bytes of one ranged GET on S3 and the Hub
RETRY_AFTER_MAX_S = 120.0


@dataclass(frozen=True)
class RetryPolicy:
    """How a download waits, tries again and gives up; the stage builds one and passes it in."""

    tries: int = 8
    """Tries in a row without progress (a byte past the most the part held) before giving up."""
    backoff_s: float = 0.5
    """The first pause between tries; doubled each try without progress."""
    backoff_max_s: float = 30.0
    timeout_s: float = 60.0
    """Seconds to connect and to wait for a byte; also the stall window: a try that receives
    fewer than `stall_bytes` in this many seconds is given up."""
    stall_bytes: int = 32 * 1024
    progress_every_s: float = 5.0
    """The least time between two download progress lines (they are the stage's heartbeat)."""
    max_redirects: int = 10

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> RetryPolicy:
        """The defaults, with CORPUS_FETCH_BACKOFF_S and CORPUS_FETCH_TIMEOUT_S when set."""
        return cls(
            backoff_s=_seconds(environ, "CORPUS_FETCH_BACKOFF_S", cls.backoff_s, 0.0),
            timeout_s=_seconds(environ, "CORPUS_FETCH_TIMEOUT_S", cls.timeout_s, 0.001),
        )


def _seconds(environ: Mapping[str, str], name: str, default: float, least: float) -> float:
    value = environ.get(name)
    if value is None:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not least <= seconds < float("inf"):
        raise ConfigError(f"{name}={value!r}: must be a number of seconds, at least {least:g}")
    return seconds


DEFAULT_POLICY = RetryPolicy()
TIMEOUT_S = DEFAULT_POLICY.timeout_s  # the timeout of clients that take no policy


Note = Callable[[str], None]


def _quiet(line: str) -> None:
    """A `note` that says nothing."""


def is_remote(path: str) -> bool:
    """Whether a source path is a URL this module downloads."""
    return urlsplit(path).scheme in SCHEMES


def shown(url: str) -> str:
    """A URL as records and messages show it: no user, password or query string."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


@dataclass(frozen=True)
class RemoteFile:
    """One remote object and what identifies its content."""

    url: str
    name: str
    """Its name below the listing's fixed prefix (the file name for one URL)."""
    size: int | None
    etag: str | None = None
    version_id: str | None = None
    last_modified: str | None = None

    def identity(self) -> dict[str, Any]:
        """What the records keep: the shown URL and the content identity."""
        return {**asdict(self), "url": shown(self.url)}


@dataclass(frozen=True)
class Downloaded:
    """A finished download: where, how many bytes, and which bytes."""

    path: Path
    bytes: int
    transferred: int
    """Bytes received by this call (less than `bytes` when it resumed a part)."""
    remote: RemoteFile
    """The identity of the bytes kept: the server's, from the responses that sent them."""
    verified: bool
    """Whether the server confirmed the size (False: a close-delimited body, two reads agreed)."""


def check_url(source: str, url: str) -> None:
    """A source URL this module can fetch, without credentials in it (ConfigError otherwise)."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ConfigError(f"source {source!r}: URL scheme must be one of {', '.join(SCHEMES)}")
    if parts.username is not None or parts.password is not None:
        raise ConfigError(
            f"source {source!r}: {shown(url)} has a user or password in it; credentials come "
            "from the environment (AWS_ACCESS_KEY_ID, ~/.aws, HF_TOKEN), never from the config"
        )
    if parts.scheme in ("http", "https") and any(ch in parts.path for ch in "*?["):
        raise ConfigError(f"source {source!r}: {shown(url)}: HTTP has no listing to glob")


def list_files(
    source: str, url: str, note: Note = _quiet, policy: RetryPolicy = DEFAULT_POLICY
) -> list[RemoteFile]:
    """The remote files a source URL names, sorted by name (a glob's matches; one file else)."""
    check_url(source, url)
    if urlsplit(url).scheme in ("http", "https"):
        return [_Http(source, note, policy).head(url)]
    return refuse_collisions(source, _Store(source, note, policy).list(url))


def download(
    source: str,
    remote: RemoteFile,
    dest: Path,
    note: Note = _quiet,
    policy: RetryPolicy = DEFAULT_POLICY,
) -> Downloaded:
    """`remote` at `dest` (resuming `dest.part`), checked against the identity and size the
    server sent with the bytes; that identity is kept in a sidecar beside `dest`."""
    _remove(dest, _identity_file(dest))  # not reused by the caller: another version's bytes, if any
    part = dest.with_name(dest.name + ".part")
    kept = _kept(_sidecar(part), remote.url) if part.exists() else None
    if part.exists() and (kept is None or not same_content(kept, remote)):
        _remove(part, _sidecar(part))  # bytes of another version of the object
        kept = None
    dest.parent.mkdir(parents=True, exist_ok=True)
    client: _Http | _Store = (
        _Http(source, note, policy)
        if urlsplit(remote.url).scheme in ("http", "https")
        else _Store(source, note, policy)
    )
    with _Sink(part, kept) as sink:
        if sink.size:
            note(f"source {source}: resuming {shown(remote.url)} at byte {sink.size:,}")
        client.fetch(remote, sink)
        size, kept, received = sink.size, sink.kept or remote, sink.received
        verified = sink.verified or (kept.size is not None and size == kept.size)
    if kept.size is not None and size != kept.size:
        _remove(part, _sidecar(part))
        raise TransientError(
            f"source {source!r}: {shown(remote.url)} gave {size:,} bytes, but its server "
            f"said {kept.size:,} (changed while it was downloaded?)"
        )
    done = Downloaded(dest, size, received, kept, verified)
    write_json(_identity_file(dest), _finished_record(done))
    part.rename(dest)
    _sidecar(part).unlink(missing_ok=True)
    fsync_dir(dest.parent)
    return done


def _finished_record(done: Downloaded) -> dict[str, Any]:
    """A finished download's sidecar: the identity of its bytes, their count, whether verified."""
    return {"remote": done.remote.identity(), "bytes": done.bytes, "verified": done.verified}


def reusable(dest: Path, remote: RemoteFile) -> Downloaded | None:
    """The finished download at `dest` when its sidecar names the same content as `remote`
    (ETag, version, Last-Modified, size) and it holds the bytes the sidecar says; else None."""
    done = finished(dest, remote.url)
    if done is None or not same_content(done.remote, remote):
        return None
    if _load(_identity_file(dest)) != _finished_record(done):
        return None  # the file is not the size its sidecar says
    if remote.size is not None and remote.size != done.bytes:
        return None
    return done


def finished(dest: Path, url: str) -> Downloaded | None:
    """The finished download at `dest` of the object at `url`, as its sidecar describes it
    (the identity of the bytes kept); None when there is none."""
    record = _load(_identity_file(dest))
    kept = _remote_from(record.get("remote"), url) if record is not None else None
    if record is None or kept is None or not dest.is_file():
        return None
    size = dest.stat().st_size
    return Downloaded(dest, size, 0, kept, record.get("verified") is True)


def discard(dest: Path) -> None:
    """Remove a download (finished or not) and its sidecars: its bytes are not to be reused."""
    part = dest.with_name(dest.name + ".part")
    _remove(dest, _identity_file(dest), part, _sidecar(part))


def same_content(a: RemoteFile, b: RemoteFile) -> bool:
    """Whether two identities name the same bytes: the same URL, no validator (ETag, version,
    Last-Modified) or size that both have and that differs, and at least one validator equal."""
    pairs = [(a.etag, b.etag), (a.version_id, b.version_id), (a.last_modified, b.last_modified)]
    if shown(a.url) != shown(b.url) or _conflict(a, b):
        return False
    return any(x is not None and x == y for x, y in pairs)


def _conflict(a: RemoteFile, b: RemoteFile) -> str | None:
    """The first of ETag, version, Last-Modified and size that both have and that differs."""
    for field in ("etag", "version_id", "last_modified", "size"):
        x, y = getattr(a, field), getattr(b, field)
        if x is not None and y is not None and x != y:
            return f"{field} {x} -> {y}"
    return None


def _identity_file(dest: Path) -> Path:
    """Where the identity of a finished download's bytes is kept: `NAME.identity.json`."""
    return dest.with_name(dest.name + ".identity.json")


def _sidecar(path: Path) -> Path:
    """Where the identity of the bytes in a part (`NAME.part.json`) is kept."""
    return path.with_name(path.name + ".json")


def _remove(*paths: Path) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


def _load(path: Path) -> dict[str, Any] | None:
    """A sidecar's JSON object; None when it is missing or unreadable."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _kept(sidecar: Path, url: str) -> RemoteFile | None:
    """The identity of a part's bytes, from its sidecar."""
    return _remote_from(_load(sidecar), url)


def record_identity(data: Any) -> RemoteFile | None:
    """The RemoteFile a record holds (`RemoteFile.identity()` and more), at its shown URL."""
    url = data.get("url") if isinstance(data, dict) else None
    return _remote_from(data, url) if isinstance(url, str) else None


def _remote_from(data: Any, url: str) -> RemoteFile | None:
    """A RemoteFile from an identity record (`RemoteFile.identity()`), at `url`."""
    if not isinstance(data, dict):
        return None
    name, size = data.get("name"), data.get("size")
    etag, version, modified = (data.get(k) for k in ("etag", "version_id", "last_modified"))
    if not isinstance(name, str) or not isinstance(size, int | None):
        return None
    if not all(isinstance(v, str | None) for v in (etag, version, modified)):
        return None
    return RemoteFile(url, name, size, etag, version, modified)


class _Sink:
    """The part file being downloaded, open for appending, and what is known of its bytes: the
    identity of the response they came from (kept in the part's sidecar), the most bytes it
    has held (a try makes progress only past that), whether its end is confirmed. Closing it
    fsyncs the file."""

    def __init__(self, path: Path, kept: RemoteFile | None = None) -> None:
        self.fh = open(path, "ab")  # noqa: SIM115 (closed by __exit__)
        self.sidecar = _sidecar(path)
        self.kept = kept if self.size else None
        self.high = self.size
        self.received = 0
        self.verified = False
        self.complete = self.kept is not None and self.kept.size == self.size
        self.whole_reads: set[int] = set()
        """Sizes of whole close-delimited bodies read (a size unknown to the server)."""

    def __enter__(self) -> _Sink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.fh.close()

    @property
    def size(self) -> int:
        return self.fh.tell()

    def write(self, data: bytes) -> None:
        self.fh.write(data)
        self.received += len(data)

    def restart(self) -> None:
        """Drop every byte: the server sends the whole object again."""
        self.fh.seek(0)
        self.fh.truncate()
        self.complete = False

    def keep(self, identity: RemoteFile | None) -> None:
        """Record the identity of the bytes in the part (None: no bytes of any)."""
        self.kept = identity
        if identity is None:
            self.sidecar.unlink(missing_ok=True)
        else:
            write_json(self.sidecar, identity.identity())

    def finish(self, verified: bool) -> None:
        """The part holds the whole object (`verified`: its end was confirmed by the server)."""
        self.complete, self.verified = True, verified

    def progress(self) -> int:
        """Bytes past the most the part held before this call."""
        gained = max(self.size - self.high, 0)
        self.high = max(self.high, self.size)
        return gained


class _Retry(Exception):
    """A try that failed in a way another try may not (after `wait_s`, when given), having
    made `moved` bytes of progress first (a stalled try makes none, whatever it received)."""

    def __init__(
        self, reason: str, wait_s: float | None = None, moved: int = 0, stalled: bool = False
    ) -> None:
        super().__init__(reason)
        self.wait_s = wait_s
        self.moved = moved
        self.stalled = stalled


def _retrying(
    source: str,
    url: str,
    attempt: Callable[[], int],
    note: Note,
    policy: RetryPolicy = DEFAULT_POLICY,
) -> int:
    return retrying(f"source {source!r}", url, attempt, note, policy)


def retrying(
    what: str,
    url: str,
    attempt: Callable[[], int],
    note: Note = _quiet,
    policy: RetryPolicy = DEFAULT_POLICY,
) -> int:
    """Call `attempt` (which returns the bytes it moved) until it returns without _Retry; after
    `policy.tries` tries in a row without progress, TransientError."""
    total, idle = 0, 0
    while True:
        try:
            return total + attempt()
        except _Retry as exc:
            total += exc.moved
            idle = 0 if exc.moved else idle + 1
            if idle >= policy.tries:
                raise TransientError(
                    f"{what}: {shown(url)}: {exc} ({policy.tries} tries in a row without a "
                    "new byte)"
                ) from None
            wait = exc.wait_s
            if wait is None:
                wait = min(policy.backoff_s * 2 ** max(idle - 1, 0), policy.backoff_max_s)
            note(f"{what}: {shown(url)}: {exc}; trying again in {wait:.1f} s")
            time.sleep(min(wait, RETRY_AFTER_MAX_S))


# HTTP(S): requests, with Range and If-Range, every response checked against the part's identity.

REDIRECTS = (301, 302, 303, 307, 308)


class _Http:
    def __init__(self, source: str, note: Note, policy: RetryPolicy = DEFAULT_POLICY) -> None:
        import requests

        self.source, self.note, self.policy = source, note, policy
        self.where = f"source {source!r}"
        self.session = requests.Session()
        self.session.headers["Accept-Encoding"] = "identity"  # the bytes as stored

    def head(self, url: str) -> RemoteFile:
        def attempt() -> int:
            resp = self._request("HEAD", url, {})
            resp.close()
            self._raise_for_status(url, resp.status_code, resp.headers)
            found.append(resp)
            return 0

        found: list[Any] = []
        _retrying(self.source, url, attempt, self.note, self.policy)
        headers = found[0].headers
        length = headers.get("Content-Length")
        return RemoteFile(
            url=url,
            name=Path(urlsplit(url).path).name or "index",
            size=int(length) if length is not None and length.isdigit() else None,
            etag=headers.get("ETag"),
            last_modified=headers.get("Last-Modified"),
        )

    def fetch(self, remote: RemoteFile, part: _Sink) -> int:
        meter = _Meter(f"source {self.source}", remote.url, part, self.note, self.policy)

        def attempt() -> int:
            try:
                while not part.complete:
                    self._exchange(remote, part, meter)
            except _Retry as exc:
                gained = part.progress()
                exc.moved = 0 if exc.stalled else gained
                raise
            return part.progress()

        return _retrying(self.source, remote.url, attempt, self.note, self.policy)

    def _exchange(self, remote: RemoteFile, part: _Sink, meter: _Meter) -> None:
        """One GET from the part's end on, its answer checked against the part's identity."""
        have, kept = part.size, part.kept
        headers: dict[str, str] = {}
        if have and kept is not None:
            headers["Range"] = f"bytes={have}-"
            validator = kept.etag if kept.etag and not kept.etag.startswith("W/") else None
            if validator or kept.last_modified:
                headers["If-Range"] = validator or str(kept.last_modified)
        resp = self._request("GET", remote.url, headers, stream=True)
        with resp:
            self._raise_for_status(remote.url, resp.status_code, resp.headers)
            served = _served(remote, resp)
            if resp.status_code == 416:
                self._at_end(part, served, resp.headers.get("Content-Range", ""))
                return
            if resp.status_code == 206 and headers:
                start = _range_start(resp.headers.get("Content-Range", ""))
                if start != have:
                    raise _Retry(f"asked for byte {have:,}, got a range from byte {start}")
                self._same_object(part, served)
            elif resp.status_code in (200, 206):
                if resp.status_code == 206 and _range_start(resp.headers.get("Content-Range", "")):
                    raise _Retry("got a range that does not start at byte 0")
                part.restart()  # a whole object: no ranges, or the object changed
                self._keep(remote, part, served)
            else:
                raise DataError(f"{self.where}: {shown(remote.url)}: HTTP {resp.status_code}")
            self._body(resp, part, meter)
            self._after_body(remote, resp, part, served)

    def _same_object(self, part: _Sink, served: RemoteFile) -> None:
        """A range of the part's object, or start again from byte 0 (never splice two)."""
        assert part.kept is not None
        conflict = _conflict(part.kept, served)
        if conflict:
            have = part.size
            part.restart()
            part.keep(None)
            raise _Retry(f"the object changed after byte {have:,} ({conflict}); from byte 0")
        if part.kept.size is None and served.size is not None:
            part.keep(served)

    def _keep(self, remote: RemoteFile, part: _Sink, served: RemoteFile) -> None:
        """Take the identity of a whole response for the part, saying when it is not the
        listing's (the object changed since it was listed: its new bytes are kept). A body
        of unstated size (chunked) of the listed version has the listed size."""
        conflict = _conflict(remote, served)
        if conflict and part.kept is None:
            self.note(
                f"source {self.source}: {shown(remote.url)} changed since it was listed "
                f"({conflict}); downloading the new version"
            )
        if served.size is None and same_content(remote, served):
            served = replace(served, size=remote.size)
        part.keep(served)

    def _body(self, resp: Any, part: _Sink, meter: _Meter) -> None:
        """The response's bytes into the part; a try that receives fewer than
        `stall_bytes` in a window of `timeout_s` seconds is given up as stalled."""
        window_start, window_bytes = time.monotonic(), 0
        try:
            while chunk := resp.raw.read1(CHUNK, decode_content=False):
                part.write(chunk)
                meter.tick()
                window_bytes += len(chunk)
                now = time.monotonic()
                if now - window_start >= self.policy.timeout_s:
                    if window_bytes < self.policy.stall_bytes:
                        raise _Retry(
                            f"stalled ({window_bytes:,} bytes in {now - window_start:.0f} s)",
                            stalled=True,
                        )
                    window_start, window_bytes = now, 0
        except _Retry:
            raise
        except Exception as exc:  # the connection broke mid-body
            raise _Retry(f"connection broken ({type(exc).__name__})") from None

    def _after_body(self, remote: RemoteFile, resp: Any, part: _Sink, served: RemoteFile) -> None:
        """Whether the part is whole: the size the server gave, a chunked body's end, or for a
        close-delimited body a probe past its end (the next exchange: 416 confirms it)."""
        if served.size is not None:
            if part.size == served.size:
                part.finish(verified=True)
            elif part.size > served.size:
                part.restart()
                part.keep(None)
                raise _Retry(f"got more than the {served.size:,} bytes the server announced")
            return
        if "chunked" in resp.headers.get("Transfer-Encoding", "").lower():
            part.finish(verified=True)
            return
        if resp.status_code == 200 and part.size in part.whole_reads:
            part.finish(verified=False)
            self.note(
                f"source {self.source}: {shown(remote.url)} has no Content-Length and no Range "
                f"support, so its size ({part.size:,} bytes, the same in two whole reads) cannot "
                "be verified; pin the source's sha256 in the config to check its bytes"
            )
        elif resp.status_code == 200:
            part.whole_reads.add(part.size)

    def _at_end(self, part: _Sink, served: RemoteFile, content_range: str) -> None:
        """A 416 for the part's end: the part is whole if the object is still the same one
        and has as many bytes; else start again from byte 0."""
        have, kept = part.size, part.kept
        match = re.fullmatch(r"bytes \*/(\d+)", content_range.strip())
        total = int(match.group(1)) if match else None
        conflict = _conflict(kept, replace(served, size=total)) if kept is not None else "none"
        size = kept.size if kept is not None and kept.size is not None else total
        if not have or conflict or (size is not None and size != have):
            part.restart()
            part.keep(None)
            raise _Retry(f"HTTP 416 for byte {have:,} ({conflict or f'size {size}'})")
        part.finish(verified=True)

    def _request(self, method: str, url: str, headers: dict[str, str], stream: bool = False) -> Any:
        """The response to `method` on `url`, following at most `max_redirects` redirects, to
        http(s) URLs only."""
        target = url
        for _ in range(self.policy.max_redirects + 1):
            resp = self._send(method, target, headers, stream)
            location = resp.headers.get("Location")
            if resp.status_code not in REDIRECTS or not location:
                return resp
            resp.close()
            target = urljoin(target, location)
            scheme = urlsplit(target).scheme
            if scheme not in ("http", "https"):
                raise DataError(
                    f"{self.where}: {shown(url)} redirects to a {scheme or 'schemeless'} URL; "
                    "only http and https redirects are followed"
                )
        raise DataError(
            f"{self.where}: {shown(url)}: more than {self.policy.max_redirects} redirects "
            f"(a redirect loop? the last to {shown(target)})"
        )

    def _send(self, method: str, url: str, headers: dict[str, str], stream: bool) -> Any:
        import requests

        timeout = self.policy.timeout_s
        try:
            return self.session.request(
                method,
                url,
                headers=headers,
                stream=stream,
                timeout=(timeout, timeout),
                allow_redirects=False,
            )
        except requests.exceptions.SSLError as exc:
            if "CERTIFICATE_VERIFY_FAILED" in str(exc):  # no retry makes it trusted
                raise ConfigError(
                    f"{self.where}: {shown(url)}: the server's certificate is not "
                    "trusted (a private CA goes in REQUESTS_CA_BUNDLE or SSL_CERT_FILE)"
                ) from None
            raise _Retry(f"cannot connect ({type(exc).__name__})") from None
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise _Retry(f"cannot connect ({type(exc).__name__})") from None
        except requests.RequestException as exc:
            raise DataError(f"{self.where}: {shown(url)}: {type(exc).__name__}") from None

    def _raise_for_status(self, url: str, status: int, headers: Any) -> None:
        if status < 400 or status == 416:
            return
        if status in (408, 429) or status >= 500:
            raise _Retry(f"HTTP {status}", _retry_after(headers.get("Retry-After")))
        where = f"{self.where}: {shown(url)}"
        if status in (401, 403):
            raise ConfigError(
                f"{where}: HTTP {status}, access denied (credentials come from the environment)"
            )
        if status in (404, 410):
            raise DataError(f"{where}: HTTP {status}, not found")
        raise DataError(f"{where}: HTTP {status}")


class _Meter:
    """Download progress lines, at most one every `progress_every_s` seconds: the bytes the
    part holds (of how many), and the rate of this call's bytes."""

    def __init__(self, what: str, url: str, part: _Sink, note: Note, policy: RetryPolicy) -> None:
        self.what, self.url, self.part, self.note = what, url, part, note
        self.every_s = policy.progress_every_s
        self.start = self.last = time.monotonic()

    def tick(self) -> None:
        now = time.monotonic()
        if now - self.last < self.every_s:
            return
        self.last = now
        kept = self.part.kept
        total = f" of {kept.size / 1e6:,.1f}" if kept is not None and kept.size else ""
        rate = self.part.received / 1e6 / max(now - self.start, 1e-9)
        self.note(
            f"{self.what}: {shown(self.url)}: {self.part.size / 1e6:,.1f}{total} MB, "
            f"{rate:,.2f} MB/s"
        )


def _served(remote: RemoteFile, resp: Any) -> RemoteFile:
    """The identity a 200 or 206 response gives its bytes: ETag, Last-Modified and the object's
    size (Content-Length of a 200, the total of a 206's Content-Range; None when not sent)."""
    headers = resp.headers
    size: int | None = None
    if resp.status_code == 206:
        match = re.fullmatch(r"bytes \d+-\d+/(\d+)", headers.get("Content-Range", "").strip())
        size = int(match.group(1)) if match else None
    elif resp.status_code == 200:
        length = headers.get("Content-Length", "")
        size = int(length) if length.isdigit() else None
    return replace(
        remote,
        size=size,
        etag=headers.get("ETag"),
        version_id=None,
        last_modified=headers.get("Last-Modified"),
    )


def _range_start(content_range: str) -> int | None:
    match = re.match(r"bytes (\d+)-", content_range)
    return int(match.group(1)) if match else None


def _retry_after(value: str | None) -> float | None:
    """Retry-After's seconds (as a number or an HTTP date), at most RETRY_AFTER_MAX_S."""
    if value is None:
        return None
    if value.strip().isdigit():
        return min(float(value), RETRY_AFTER_MAX_S)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return min(max(when.timestamp() - time.time(), 0.0), RETRY_AFTER_MAX_S)


# S3 and the Hub: fsspec.


def filesystem(url: str, what: str) -> tuple[Any, str]:
    """The fsspec file system of a URL and the path in it; ConfigError naming `what` when the
    package that reads the URL's scheme is missing."""
    import fsspec

    try:
        return fsspec.core.url_to_fs(url)  # type: ignore[no-any-return]
    except ImportError as exc:
        raise ConfigError(
            f"{what}: {shown(url)} needs {exc.name or 'a package'} "
            "(pip install s3fs for s3://; huggingface_hub for hf://)"
        ) from None


class _Store:
    """Objects of a store: S3 through `s3.py` (botocore), the Hub through fsspec. With
    `via_fsspec`, S3 too (a glob, then a ranged GET and a HEAD per object, one at a time):
    bench/bench_fetch.py's baseline."""

    def __init__(
        self,
        source: str,
        note: Note,
        policy: RetryPolicy = DEFAULT_POLICY,
        via_fsspec: bool = False,
    ) -> None:
        self.source, self.note, self.policy = source, note, policy
        self.botocore = not via_fsspec

    def _fs(self, url: str) -> tuple[Any, str]:
        return filesystem(url, f"source {self.source!r}")

    def list(self, url: str) -> list[RemoteFile]:
        if self.botocore and urlsplit(url).scheme == "s3":
            from corpus_assets.core.store import s3

            return s3.list_objects(self.source, url, self.note, self.policy)
        fs, path = self._fs(url)
        scheme = urlsplit(url).scheme
        found: dict[str, dict[str, Any]] = {}

        def attempt() -> int:
            found.clear()
            fs.invalidate_cache()
            with self._errors(url):
                if any(ch in path for ch in "*?["):
                    found.update(fs.glob(path, detail=True))
                else:
                    found[path] = fs.info(path)
            return 0

        _retrying(self.source, url, attempt, self.note, self.policy)
        files = {p: info for p, info in found.items() if info.get("type", "file") == "file"}
        if not files:
            raise DataError(f"source {self.source!r}: no objects match {shown(url)}")
        prefix = _fixed_prefix(path)
        return [
            _store_file(f"{scheme}://{p}", p[len(prefix) :].lstrip("/") or Path(p).name, info)
            for p, info in sorted(files.items())
        ]

    def fetch(self, remote: RemoteFile, part: _Sink) -> int:
        if self.botocore and urlsplit(remote.url).scheme == "s3":
            from corpus_assets.core.store import s3

            return s3.S3(self.source, self.note, self.policy).fetch(remote, part)
        fs, path = self._fs(remote.url)
        size = remote.size if remote.size is not None else fs.size(path)

        def attempt() -> int:
            moved = 0
            while (have := part.size) < size:
                end = min(have + FSSPEC_BLOCK, size)
                try:
                    with self._errors(remote.url):
                        block = fs.cat_file(path, start=have, end=end)
                except _Retry as exc:
                    exc.moved = moved
                    raise
                part.write(block)
                moved += len(block)
            return moved

        moved = _retrying(self.source, remote.url, attempt, self.note, self.policy)
        with self._errors(remote.url):
            fs.invalidate_cache()
            now = _store_file(remote.url, remote.name, fs.info(path))
        if now.identity() != remote.identity():
            part.restart()
            raise TransientError(
                f"source {self.source!r}: {shown(remote.url)} changed while it was downloaded"
            )
        return moved

    def _errors(self, url: str) -> contextlib.AbstractContextManager[None]:
        return store_errors(f"source {self.source!r}", url)


@contextlib.contextmanager
def store_errors(what: str, url: str) -> Iterator[None]:
    """fsspec's errors as ours: missing is DataError, denied ConfigError, the network's retried
    (`what` begins each message: "source 'web'", "publish")."""
    where = f"{what}: {shown(url)}"
    try:
        yield
    except (_Retry, ConfigError, DataError):
        raise
    except FileNotFoundError:
        raise DataError(f"{where}: not found") from None
    except PermissionError:
        raise ConfigError(
            f"{where}: access denied (credentials come from the environment)"
        ) from None
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}"
        if "InvalidAccessKeyId" in text or "SignatureDoesNotMatch" in text:
            raise ConfigError(f"{where}: credentials refused ({type(exc).__name__})") from None
        if isinstance(exc, OSError | TimeoutError) or type(exc).__module__.startswith(_NETWORK):
            raise _Retry(type(exc).__name__) from None
        raise


_NETWORK = ("aiohttp", "botocore", "aiobotocore", "requests", "urllib3")


def refuse_collisions(source: str, files: list[RemoteFile]) -> list[RemoteFile]:
    """`files`, unless two would be one path on disk (`a`, `//a`, `./a`) or a file and a folder
    of one name (`x` beside `x/y`): DataError naming both, like a `..` in a name."""
    seen: dict[str, RemoteFile] = {}
    for item in files:
        local = "/".join(p for p in item.name.split("/") if p not in ("", "."))
        if local in seen:
            raise DataError(
                f"source {source!r}: objects {shown(seen[local].url)} and {shown(item.url)} "
                f"would both be the file {local!r}; rename one or narrow the glob"
            )
        seen[local] = item
    for local, item in seen.items():
        parts = local.split("/")
        for depth in range(1, len(parts)):
            folder = seen.get("/".join(parts[:depth]))
            if folder is not None:
                raise DataError(
                    f"source {source!r}: object {shown(folder.url)} is also the folder of "
                    f"{shown(item.url)}; a file and a folder of one name cannot both be "
                    "downloaded: rename one or narrow the glob"
                )
    return files


def _fixed_prefix(path: str) -> str:
    """The part of a (glob) path before its first wildcard, up to a `/`."""
    for i, ch in enumerate(path):
        if ch in "*?[":
            return path[: path.rfind("/", 0, i) + 1]
    return path[: path.rfind("/") + 1]


def _store_file(url: str, name: str, info: dict[str, Any]) -> RemoteFile:
    """A listed object's identity: S3's ETag, VersionId, LastModified; the Hub's blob id."""
    etag = info.get("ETag") or info.get("etag") or info.get("blob_id")
    modified = info.get("LastModified") or info.get("last_modified")
    return RemoteFile(
        url=url,
        name=name,
        size=int(info["size"]) if info.get("size") is not None else None,
        etag=str(etag) if etag is not None else None,
        version_id=info.get("VersionId") or info.get("version_id"),
        last_modified=str(modified) if modified is not None else None,
    )


@contextlib.contextmanager
def _reading(url: str) -> Iterator[None]:
    """`store_errors` for a reader: what the network did is an OSError naming the URL."""
    try:
        with store_errors("published build", url):
            yield
    except _Retry as exc:
        raise OSError(f"published build: {shown(url)}: {exc}") from None


class RemotePath:
    """A folder or file behind an fsspec URL, with the few `Path` methods a reader of a published
    build needs: `/`, `name`, `exists`, `is_file`, `is_dir`, `iterdir`, `open("rb")` (streaming,
    ranged reads) and `read_bytes`. It prints as its URL, without credentials or query."""

    def __init__(self, url: str, fs: Any = None, path: str | None = None) -> None:
        self.url = url.rstrip("/")
        if fs is None or path is None:
            fs, path = filesystem(self.url, "published build")
        self.fs, self.path = fs, str(path).rstrip("/")

    def __truediv__(self, name: str) -> RemotePath:
        return RemotePath(f"{self.url}/{name}", self.fs, f"{self.path}/{name}")

    def __str__(self) -> str:
        return shown(self.url)

    def __repr__(self) -> str:
        return f"RemotePath({shown(self.url)!r})"

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    def _info(self) -> dict[str, Any] | None:
        with _reading(self.url):
            try:
                info: dict[str, Any] = self.fs.info(self.path)
            except FileNotFoundError:
                return None
        return info

    def exists(self) -> bool:
        return self._info() is not None

    def is_file(self) -> bool:
        info = self._info()
        return info is not None and info.get("type") == "file"

    def is_dir(self) -> bool:
        """A prefix holding something (object stores have no empty folders)."""
        with _reading(self.url):
            return bool(self.fs.isdir(self.path))

    def iterdir(self) -> Iterator[RemotePath]:
        with _reading(self.url):
            found = self.fs.ls(self.path, detail=False)
        for path in sorted(found):
            name = str(path).rstrip("/").rsplit("/", 1)[-1]
            yield self / name

    def open(self, mode: str = "rb") -> Any:
        if mode != "rb":
            raise ValueError(f"{self}: a published build is opened for reading ('rb') only")
        with _reading(self.url):
            return self.fs.open(self.path, "rb", block_size=FSSPEC_BLOCK)

    def read_bytes(self) -> bytes:
        with _reading(self.url):
            data: bytes = self.fs.cat_file(self.path)
        return data
