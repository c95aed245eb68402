"""S3 sources through one botocore client: a listing of every object (ListObjectsV2, or one HEAD
for a plain key) and GETs checked against the identity the bytes must have.

Listing. A glob (`*`, `?`, `[`, `**`) is matched with fsspec's glob rules on the keys listed
below its literal start, so an object whose key is also a prefix (`x` beside `x/y.jsonl`) is
seen like any other; keys ending in `/` (the folder markers of consoles) are skipped. A listing
carries each object's ETag, size and date; a HEAD of a plain key also its VersionId.

Fetching. A GET asks for the bytes from the end of the part on (the whole object in one request
when the part is empty). Each response's ETag and total size must be those of the bytes already
in the part: an object replaced since it was listed is downloaded whole again, and the identity
kept (the part's `kept`) is the one of the bytes received, VersionId included (written beside
the part for an object of more than one block, which a killed fetch then resumes). Once a
response names a version, every later GET of the object asks for that version. A single-part
ETag (32 hex digits) is the MD5 of the object: the bytes are checked against it (not for SSE-KMS
or SSE-C objects, whose ETag is not the MD5); a mismatch downloads the object again, and
`MD5_TRIES` mismatches in a row are DataError (exit 65).

Endpoint and credentials are found the standard way (`AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`,
the AWS config and credential chain); without credentials the requests go unsigned (public
buckets). botocore does not retry: `remote.retrying` does, like for every remote file.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import re
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from corpus_assets.core.errors import ConfigError, DataError, TransientError
from corpus_assets.core.store import remote
from corpus_assets.core.store.remote import RemoteFile

MD5_TRIES = 3
CHANGES = 8
"""Times one download may find its object replaced before it gives up (TransientError)."""
POOL = 32
"""Connections the shared client keeps (the parallel downloads use at most this many)."""
_SINGLE_PART = re.compile(r'^"?([0-9a-f]{32})"?$')
_CLIENT_ERRORS = {
    "NoSuchKey": DataError,
    "NoSuchBucket": DataError,
    "404": DataError,
    "AccessDenied": ConfigError,
    "403": ConfigError,
    "InvalidAccessKeyId": ConfigError,
    "SignatureDoesNotMatch": ConfigError,
    "ExpiredToken": ConfigError,
}
_client_lock = threading.Lock()
_clients: dict[float, Any] = {}


def split(url: str) -> tuple[str, str]:
    """The bucket and key of an `s3://BUCKET/KEY` URL (the key as written, `//` kept)."""
    parts = urlsplit(url, allow_fragments=False)
    return parts.netloc, parts.path[1:]


def client(timeout_s: float) -> Any:
    """The process's botocore S3 client for a timeout (thread-safe; made on first use)."""
    with _client_lock:
        if timeout_s not in _clients:
            _clients[timeout_s] = _new_client(timeout_s)
        return _clients[timeout_s]


def _new_client(timeout_s: float) -> Any:
    import botocore.session  # type: ignore[import-untyped]
    from botocore import UNSIGNED
    from botocore.config import Config  # type: ignore[import-untyped]

    session = botocore.session.get_session()
    unsigned = {"signature_version": UNSIGNED} if session.get_credentials() is None else {}
    config = Config(
        connect_timeout=timeout_s,
        read_timeout=timeout_s,
        max_pool_connections=POOL,
        retries={"total_max_attempts": 1},
        response_checksum_validation="when_required",
        **unsigned,
    )
    return session.create_client("s3", config=config)


@contextlib.contextmanager
def errors(what: str, url: str) -> Iterator[None]:
    """botocore's errors as ours: missing is DataError, denied ConfigError, 5xx, throttling and
    the network's retried (`what` begins each message)."""
    from botocore.exceptions import (  # type: ignore[import-untyped]
        BotoCoreError,
        ClientError,
        NoCredentialsError,
    )

    where = f"{what}: {remote.shown(url)}"
    try:
        yield
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        kind = _CLIENT_ERRORS.get(code)
        if kind is ConfigError:
            raise ConfigError(
                f"{where}: access denied ({code}; credentials come from the environment)"
            ) from None
        if kind is DataError:
            raise DataError(f"{where}: not found ({code})") from None
        if status >= 500 or status in (408, 429) or "Throttl" in code or code == "SlowDown":
            raise remote._Retry(f"S3 {code or status}") from None
        raise DataError(f"{where}: S3 refused the request ({code or status})") from None
    except NoCredentialsError:
        raise ConfigError(f"{where}: no credentials (AWS_ACCESS_KEY_ID, ~/.aws)") from None
    except (BotoCoreError, OSError) as exc:
        raise remote._Retry(f"connection broken ({type(exc).__name__})") from None


def list_objects(
    source: str, url: str, note: remote.Note, policy: remote.RetryPolicy = remote.DEFAULT_POLICY
) -> list[RemoteFile]:
    """The objects an `s3://` URL names, sorted by key: a glob's matches, or the one key."""
    bucket, key = split(url)
    what = f"source {source!r}"
    found: list[RemoteFile] = []

    def attempt() -> int:
        found.clear()
        with errors(what, url):
            if any(ch in key for ch in "*?["):
                found.extend(_glob(client(policy.timeout_s), bucket, key))
            else:
                found.append(_head(client(policy.timeout_s), bucket, key))
        return 0

    remote.retrying(what, url, attempt, note, policy)
    if not found:
        raise DataError(f"{what}: no objects match {remote.shown(url)}")
    return found


def _glob(s3: Any, bucket: str, pattern: str) -> list[RemoteFile]:
    from fsspec.utils import glob_translate

    start = min(i for i, ch in enumerate(pattern) if ch in "*?[")
    literal, rest = pattern[:start], pattern[start:]
    named_from = literal.rfind("/") + 1
    match = re.compile(glob_translate(pattern)).match
    pages = s3.get_paginator("list_objects_v2")
    folders = {} if "/" in rest or "**" in rest else {"Delimiter": "/"}
    files = []
    for page in pages.paginate(Bucket=bucket, Prefix=literal, **folders):
        for item in page.get("Contents", []):
            key = item["Key"]
            if key.endswith("/") or not match(key):
                continue
            files.append(
                RemoteFile(
                    url=f"s3://{bucket}/{key}",
                    name=key[named_from:],
                    size=int(item["Size"]),
                    etag=item.get("ETag"),
                    last_modified=_iso(item.get("LastModified")),
                )
            )
    return sorted(files, key=lambda f: f.url)


def _head(s3: Any, bucket: str, key: str) -> RemoteFile:
    head = s3.head_object(Bucket=bucket, Key=key)
    return RemoteFile(
        url=f"s3://{bucket}/{key}",
        name=key.rsplit("/", 1)[-1],
        size=int(head["ContentLength"]),
        etag=head.get("ETag"),
        version_id=_version(head.get("VersionId")),
        last_modified=_iso(head.get("LastModified")),
    )


def _iso(value: Any) -> str | None:
    """An S3 date as ISO 8601 UTC to the second (listings and responses agree on it)."""
    if not isinstance(value, datetime.datetime):
        return None if value is None else str(value)
    return value.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _version(value: Any) -> str | None:
    """A VersionId, or None when the bucket keeps none (S3 says "null" then)."""
    return None if value in (None, "", "null") else str(value)


class Changed(Exception):
    """The object behind a download is another one than the part's bytes came from."""

    def __init__(self, now: RemoteFile) -> None:
        super().__init__(now.etag)
        self.now = now


class S3:
    """One object's download into a part file, checked against the identity of its bytes."""

    def __init__(
        self, source: str, note: remote.Note, policy: remote.RetryPolicy = remote.DEFAULT_POLICY
    ) -> None:
        self.source, self.what, self.note, self.policy = source, f"source {source!r}", note, policy

    def fetch(self, listed: RemoteFile, part: Any) -> int:
        """Fill `part` (a `remote._Sink`) with the whole object, its identity in `part.kept`:
        the bytes of progress made."""
        self.want = part.kept or listed
        md5, changes, bad_md5, gained = _Md5(part), 0, 0, 0
        meter = remote._Meter(f"source {self.source}", listed.url, part, self.note, self.policy)
        while True:
            try:
                gained += remote.retrying(
                    self.what,
                    listed.url,
                    lambda: self._attempt(part, md5, meter),
                    self.note,
                    self.policy,
                )
            except Changed as exc:
                changes += 1
                if changes >= CHANGES:
                    raise TransientError(
                        f"{self.what}: {remote.shown(listed.url)} changed {changes} times while "
                        "it was downloaded"
                    ) from None
                self.note(f"{self.what}: {remote.shown(listed.url)} was replaced; starting again")
                self.want = exc.now
                self._restart(part, md5)
                continue
            if md5.matches(self.want):
                part.finish(verified=True)
                return gained
            bad_md5 += 1
            if bad_md5 >= MD5_TRIES:
                raise DataError(
                    f"{self.what}: {remote.shown(listed.url)}: the bytes received do not match "
                    f"the object's MD5 (its ETag) in {bad_md5} downloads"
                )
            self.note(f"{self.what}: {remote.shown(listed.url)}: MD5 mismatch; downloading again")
            self._restart(part, md5)

    def _restart(self, part: Any, md5: _Md5) -> None:
        part.restart()
        part.keep(None)
        md5.reset()

    def _attempt(self, part: Any, md5: _Md5, meter: Any) -> int:
        """One GET of the bytes after the part's end (from an empty part: the object named then
        is the one kept); raises Changed when a later response is of another object."""
        want, have = self.want, part.size
        if part.complete:
            return 0
        bucket, key = split(want.url)
        args: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if have:
            args["Range"] = f"bytes={have}-"
        if want.version_id:
            args["VersionId"] = want.version_id
        with errors(self.what, want.url):
            try:
                resp = client(self.policy.timeout_s).get_object(**args)
            except Exception as exc:
                if have and _code(exc) == "InvalidRange":  # shorter than the part: replaced
                    raise Changed(replace(want, etag=None, size=None)) from None
                raise
        now = _identity(want, resp)
        if have and (now.etag != want.etag or now.size != want.size):
            resp["Body"].close()
            raise Changed(now)
        if not have:
            self.want = now
            if now.size is not None and now.size <= remote.FSSPEC_BLOCK:
                part.kept = now  # one GET's worth: a killed fetch gets it again, no sidecar
            else:
                part.keep(now)
        md5.expect(resp)
        self._stream(resp["Body"], part, md5, meter, want.url)
        part.complete = part.size == now.size
        return int(part.progress())

    def _stream(self, body: Any, part: Any, md5: _Md5, meter: Any, url: str) -> None:
        chunks = body.iter_chunks(remote.CHUNK)
        try:
            while True:
                with errors(self.what, url):
                    chunk = next(chunks, None)
                if chunk is None:
                    break
                part.write(chunk)
                md5.update(chunk)
                meter.tick()
        except remote._Retry as exc:
            exc.moved = part.progress()
            raise
        finally:
            body.close()


def _code(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _identity(want: RemoteFile, resp: dict[str, Any]) -> RemoteFile:
    """The identity of the object a GET response's bytes are from."""
    total = re.match(r"bytes \d+-\d+/(\d+)", resp.get("ContentRange") or "")
    return replace(
        want,
        size=int(total.group(1)) if total else int(resp["ContentLength"]),
        etag=resp.get("ETag"),
        version_id=_version(resp.get("VersionId")) or want.version_id,
        last_modified=_iso(resp.get("LastModified")) or want.last_modified,
    )


class _Md5:
    """The MD5 of a part's bytes as they arrive, and whether the object's ETag is one."""

    def __init__(self, part: Any) -> None:
        self.checkable = True
        self.reset()
        if part.size:  # bytes a killed fetch left: hashed once, then the new ones as they come
            with open(part.fh.name, "rb") as fh:
                while block := fh.read(remote.CHUNK):
                    self.hash.update(block)

    def reset(self) -> None:
        self.hash = hashlib.md5(usedforsecurity=False)

    def expect(self, resp: dict[str, Any]) -> None:
        """Whether the response's object can be checked: a single-part ETag, no KMS or SSE-C."""
        encrypted = str(resp.get("ServerSideEncryption", "")).startswith("aws:kms")
        self.checkable = not encrypted and not resp.get("SSECustomerAlgorithm")

    def update(self, data: bytes) -> None:
        self.hash.update(data)

    def matches(self, want: RemoteFile) -> bool:
        single = _SINGLE_PART.match(want.etag or "")
        return not (self.checkable and single) or single.group(1) == self.hash.hexdigest()
