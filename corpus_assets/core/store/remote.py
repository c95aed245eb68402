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
killed fetch, with a sidecar `NAME.part.json` holding the remote identity the bytes came from.
Each try asks for the bytes from the end of the part on (HTTP `Range` with `If-Range`, S3 and Hub
ranged GETs), so a dropped connection or a killed fetch costs only the bytes in flight. A part
whose remote changed (another ETag, size or Last-Modified) is started again. When all bytes are
there, the size is checked and the part renamed (fsynced) to NAME. The download takes no sha256:
the fetch stage takes it from the finished file in a thread while it parses that file, a core
the download would otherwise share with the server and the socket.

Errors. Connection resets, timeouts, HTTP 408/429/5xx (429 and 503 honour Retry-After) are tried
again with exponential backoff; a try that moved bytes resets the count, and after
`RETRIES` tries in a row without a byte the fetch is TransientError (exit 75). 401 and 403 are
ConfigError (exit 64: the credentials), and so is an HTTPS certificate that is not trusted; 404,
410 and other 4xx are DataError (exit 65), each one line naming the URL.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from corpus_assets.core.errors import ConfigError, DataError, TransientError
from corpus_assets.core.store.atomic import fsync_dir

SCHEMES = ("http", "https", "s3", "hf")
CHUNK = 1 << 20
FSSPEC_BLOCK = 8 << 20  # bytes of one ranged GET on S3 and the Hub
RETRIES = 8
BACKOFF_S = float(os.environ.get("CORPUS_FETCH_BACKOFF_S", "0.5"))
BACKOFF_MAX_S = 30.0
RETRY_AFTER_MAX_S = 120.0
TIMEOUT_S = float(os.environ.get("CORPUS_FETCH_TIMEOUT_S", "60"))
"""Seconds to connect, and seconds without a byte before a try is given up (a stalled mirror)."""


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
    path: Path
    bytes: int
    transferred: int
    """Bytes received by this call (less than `bytes` when it resumed a part)."""


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


def list_files(source: str, url: str, note: Note = _quiet) -> list[RemoteFile]:
    """The remote files a source URL names, sorted by name (a glob's matches; one file else)."""
    check_url(source, url)
    if urlsplit(url).scheme in ("http", "https"):
        return [_Http(source, note).head(url)]
    return _Store(source, note).list(url)


def download(source: str, remote: RemoteFile, dest: Path, note: Note = _quiet) -> Downloaded:
    """`remote` at `dest` (resuming `dest.part`), checked against its size."""
    part, sidecar = dest.with_name(dest.name + ".part"), dest.with_name(dest.name + ".part.json")
    identity = json.dumps(remote.identity(), sort_keys=True)
    if part.exists() and (not sidecar.exists() or sidecar.read_text("utf-8") != identity):
        part.unlink()  # bytes of another version of the object
    if not part.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        sidecar.write_text(identity, encoding="utf-8")
        part.touch()
    have = part.stat().st_size
    if have:
        note(f"source {source}: resuming {shown(remote.url)} at byte {have:,}")
    client: _Http | _Store = (
        _Http(source, note)
        if urlsplit(remote.url).scheme in ("http", "https")
        else _Store(source, note)
    )
    with _Sink(part) as sink:
        transferred = client.fetch(remote, sink)
        size = sink.size
    if remote.size is not None and size != remote.size:
        part.unlink()
        raise TransientError(
            f"source {source!r}: {shown(remote.url)} gave {size:,} bytes, but its listing "
            f"said {remote.size:,} (changed while it was downloaded?)"
        )
    part.rename(dest)
    sidecar.unlink(missing_ok=True)
    fsync_dir(dest.parent)
    return Downloaded(dest, size, transferred)


class _Sink:
    """The part file being downloaded, open for appending; closing it fsyncs the file."""

    def __init__(self, path: Path) -> None:
        self.fh = open(path, "ab")  # noqa: SIM115 (closed by __exit__)

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

    def restart(self) -> None:
        """Drop every byte: the server sends the whole object again."""
        self.fh.seek(0)
        self.fh.truncate()


class _Retry(Exception):
    """A try that failed in a way another try may not (after `wait_s`, when given), having
    moved `moved` bytes first."""

    def __init__(self, reason: str, wait_s: float | None = None, moved: int = 0) -> None:
        super().__init__(reason)
        self.wait_s = wait_s
        self.moved = moved


def _retrying(source: str, url: str, attempt: Callable[[], int], note: Note) -> int:
    return retrying(f"source {source!r}", url, attempt, note)


def retrying(what: str, url: str, attempt: Callable[[], int], note: Note = _quiet) -> int:
    """Call `attempt` (which returns the bytes it moved) until it returns without _Retry."""
    total, idle = 0, 0
    while True:
        try:
            return total + attempt()
        except _Retry as exc:
            total += exc.moved
            idle = 0 if exc.moved else idle + 1
            if idle >= RETRIES:
                raise TransientError(
                    f"{what}: {shown(url)}: {exc} ({RETRIES} tries without a byte)"
                ) from None
            wait = exc.wait_s
            if wait is None:
                wait = min(BACKOFF_S * 2 ** max(idle - 1, 0), BACKOFF_MAX_S)
            note(f"{what}: {shown(url)}: {exc}; trying again in {wait:.1f} s")
            time.sleep(min(wait, RETRY_AFTER_MAX_S))


# HTTP(S): requests, with Range and If-Range.


class _Http:
    def __init__(self, source: str, note: Note) -> None:
        import requests

        self.source, self.note = source, note
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
        _retrying(self.source, url, attempt, self.note)
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
        def attempt() -> int:
            have = part.size
            if remote.size is not None and have >= remote.size:
                return 0
            headers = {"Range": f"bytes={have}-"} if have else {}
            validator = remote.etag or remote.last_modified
            if have and validator:
                headers["If-Range"] = validator
            resp = self._request("GET", remote.url, headers, stream=True)
            with resp:
                self._raise_for_status(remote.url, resp.status_code, resp.headers)
                if resp.status_code == 416:  # nothing after byte `have`: the part is whole
                    return 0
                if resp.status_code == 200 and have:  # no ranges, or the object changed
                    part.restart()
                elif resp.status_code == 206:
                    start = _range_start(resp.headers.get("Content-Range", ""))
                    if start != have:
                        raise _Retry(f"asked for byte {have:,}, got a range from byte {start}")
                moved = 0
                try:
                    for chunk in resp.raw.stream(CHUNK, decode_content=False):
                        part.write(chunk)
                        moved += len(chunk)
                except Exception as exc:  # the connection broke mid-body
                    reason = f"connection broken ({type(exc).__name__})"
                    raise _Retry(reason, moved=moved) from None
                return moved

        return _retrying(self.source, remote.url, attempt, self.note)

    def _request(self, method: str, url: str, headers: dict[str, str], stream: bool = False) -> Any:
        import requests

        try:
            return self.session.request(
                method,
                url,
                headers=headers,
                stream=stream,
                timeout=(TIMEOUT_S, TIMEOUT_S),
                allow_redirects=True,
            )
        except requests.exceptions.SSLError as exc:
            if "CERTIFICATE_VERIFY_FAILED" in str(exc):  # no retry makes it trusted
                raise ConfigError(
                    f"source {self.source!r}: {shown(url)}: the server's certificate is not "
                    "trusted (a private CA goes in REQUESTS_CA_BUNDLE or SSL_CERT_FILE)"
                ) from None
            raise _Retry(f"cannot connect ({type(exc).__name__})") from None
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise _Retry(f"cannot connect ({type(exc).__name__})") from None

    def _raise_for_status(self, url: str, status: int, headers: Any) -> None:
        if status < 400 or status == 416:
            return
        if status in (408, 429) or status >= 500:
            raise _Retry(f"HTTP {status}", _retry_after(headers.get("Retry-After")))
        where = f"source {self.source!r}: {shown(url)}"
        if status in (401, 403):
            raise ConfigError(
                f"{where}: HTTP {status}, access denied (credentials come from the environment)"
            )
        if status in (404, 410):
            raise DataError(f"{where}: HTTP {status}, not found")
        raise DataError(f"{where}: HTTP {status}")


def _range_start(content_range: str) -> int | None:
    match = re.match(r"bytes (\d+)-", content_range)
    return int(match.group(1)) if match else None


def _retry_after(value: str | None) -> float | None:
    if value is None or not value.strip().isdigit():
        return None
    return min(float(value), RETRY_AFTER_MAX_S)


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
    def __init__(self, source: str, note: Note) -> None:
        self.source, self.note = source, note

    def _fs(self, url: str) -> tuple[Any, str]:
        return filesystem(url, f"source {self.source!r}")

    def list(self, url: str) -> list[RemoteFile]:
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

        _retrying(self.source, url, attempt, self.note)
        files = {p: info for p, info in found.items() if info.get("type", "file") == "file"}
        if not files:
            raise DataError(f"source {self.source!r}: no objects match {shown(url)}")
        prefix = _fixed_prefix(path)
        return [
            _store_file(f"{scheme}://{p}", p[len(prefix) :].lstrip("/") or Path(p).name, info)
            for p, info in sorted(files.items())
        ]

    def fetch(self, remote: RemoteFile, part: _Sink) -> int:
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

        moved = _retrying(self.source, remote.url, attempt, self.note)
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
