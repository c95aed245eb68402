"""Secrets in URLs, masked wherever a URL is written: records, manifests, reports, metadata, logs.

A URL's query values and its password are secrets (a token, a presigned signature). Each is
shown as `<sha256:1a2b3c4d5e6f>`, the first 12 hex digits of its sha256, so two different
secrets are still told apart and the same secret reads the same everywhere, while the value
itself is written nowhere. The names of query parameters, the host and the path stay.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

MASK = re.compile(r"<sha256:[0-9a-f]{12}>")
URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>\\`]+")
"""A URL inside text: up to the first space, quote, backslash or angle bracket."""


def digest_mask(secret: str) -> str:
    """`<sha256:...>`: the secret's digest prefix that stands for it."""
    return f"<sha256:{hashlib.sha256(secret.encode('utf-8')).hexdigest()[:12]}>"


def mask_url(url: str) -> str:
    """`url` with every query value and the password replaced by its digest mask."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a netloc urlsplit cannot read raises here, not below)
    except ValueError:  # not a URL urlsplit reads (`[` in the host): masked by its shape
        return _mask_unparsed(url)
    if not parts.query and parts.password is None:
        return url
    query = "&".join(_mask_pair(pair) for pair in parts.query.split("&"))
    netloc = parts.netloc
    if parts.password is not None:
        user, _, host = netloc.rpartition("@")
        name = user.partition(":")[0]
        netloc = f"{name}:{_masked(user.partition(':')[2])}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


_USERINFO = re.compile(r"(?P<head>^[^/]*//[^/@:?#\[\]]*:)(?P<password>[^/@?#\[\]]*)(?P<at>@)")
"""A password in the user information of a URL; `[` and `]` cannot be in it (RFC 3986), so a
template such as `USER[:PASSWORD]@HOST` in a message has none."""


def _mask_unparsed(url: str) -> str:
    """A URL that urlsplit refuses, its password and query values masked all the same."""
    url = _USERINFO.sub(lambda m: m["head"] + _masked(m["password"]) + m["at"], url, count=1)
    head, mark, query = url.partition("?")
    return head + mark + "&".join(_mask_pair(pair) for pair in query.split("&")) if mark else url


def _mask_pair(pair: str) -> str:
    """`name=value` as `name=<sha256:...>`; a bare value is masked whole."""
    name, eq, value = pair.partition("=")
    if not eq:
        return _masked(name)
    return f"{name}={_masked(value)}"


def _masked(value: str) -> str:
    if not value or MASK.fullmatch(value):
        return value
    return digest_mask(value)


def mask_text(text: str) -> str:
    """`text` with every URL in it masked (a message, a log line, a Markdown page)."""
    if "://" not in text:
        return text
    return URL.sub(lambda m: mask_url(m.group(0)), text)


def mask_data(value: Any) -> Any:
    """A copy of JSON-like data with every URL in its strings masked."""
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, dict):
        return {k: mask_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_data(v) for v in value]
    return value


def has_masks(value: Any) -> bool:
    """Whether JSON-like data holds a digest mask (a secret that was taken out)."""
    if isinstance(value, str):
        return MASK.search(value) is not None
    if isinstance(value, dict):
        return any(has_masks(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(has_masks(v) for v in value)
    return False
