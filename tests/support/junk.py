"""Web junk and boilerplate, generated: the negative class of a small quality classifier."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path
from typing import Any

MENU = ["Home", "About us", "Contact", "Shop", "Blog", "FAQ", "Login", "Register", "Cart", "Help"]
BANNERS = [
    "We use cookies to improve your experience. By continuing you accept our cookie policy.",
    "Subscribe to our newsletter and get 10% off your first order!",
    "All rights reserved. Terms of service | Privacy policy | Sitemap",
    "Click here to download the free PDF now!!!",
    "Best price guaranteed - free shipping on orders over $50",
    "JavaScript is disabled in your browser. Please enable it to continue.",
]
KEYWORDS = [
    "cheap", "buy", "online", "best", "discount", "casino", "loans", "free", "download", "crack",
    "seo", "backlinks", "viagra", "deal", "coupon", "crypto", "bonus", "top10", "review", "2024",
]  # fmt: skip


def junk_document(rng: random.Random) -> str:
    """One junk page: a menu, banners, a keyword list, a product table or random characters."""
    kind = rng.randrange(5)
    if kind == 0:
        return "\n".join(rng.sample(MENU, 6) + rng.sample(BANNERS, 3))
    if kind == 1:
        return " ".join(rng.choice(KEYWORDS) for _ in range(rng.randint(30, 120)))
    if kind == 2:
        rows = [
            f"SKU-{rng.randint(1000, 9999)} | {rng.choice(KEYWORDS)} | ${rng.randint(1, 999)}.99"
            for _ in range(rng.randint(5, 25))
        ]
        return "\n".join(rows)
    if kind == 3:
        chars = string.ascii_letters + string.digits + "#@$%&*"
        words = ("".join(rng.choices(chars, k=rng.randint(3, 12))) for _ in range(80))
        return " ".join(words)
    return "\n".join(rng.choice(BANNERS) for _ in range(rng.randint(3, 10)))


def write_junk(path: Path, count: int, seed: int = 0) -> Path:
    """`count` junk documents as JSONL (`id`, `text`) at `path`."""
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(count):
            fh.write(json.dumps({"id": f"junk-{i:05d}", "text": junk_document(rng)}) + "\n")
    return path


REPO = Path(__file__).resolve().parents[2]
STORIES = REPO / "data" / "tinystories" / "TinyStoriesV2-GPT4-train.head10000lines.txt"
SMALL_MODEL = {"dim": 16, "bucket": 20_000}
"""fastText settings that keep a test's model small (a few MB) and its training quick."""


def stories_source(name: str = "tinystories") -> dict[str, Any]:
    """The repository's TinyStories sample as a classifier example source (1,728 documents)."""
    return {
        "name": name,
        "kind": "text",
        "path": str(STORIES),
        "separator": "<|endoftext|>",
        "license": "cdla-sharing-1.0",
    }


def junk_source(path: Path, name: str = "junk") -> dict[str, Any]:
    """A JSONL file of `write_junk` as a classifier example source."""
    return {
        "name": name,
        "kind": "jsonl",
        "path": str(path),
        "id_field": "id",
        "license": "cc0-1.0",
    }


def stories_vs_junk(folder: Path, junk: int = 1500, **settings: Any) -> dict[str, Any]:
    """A classifier config: TinyStories (positive) against `junk` generated pages (negative)
    written into `folder`, with small fastText settings; `settings` are set over it."""
    config: dict[str, Any] = {
        "name": "stories-vs-junk",
        "positive": [stories_source()],
        "negative": [junk_source(write_junk(folder / "junk.jsonl", junk))],
        "training": dict(SMALL_MODEL),
    }
    return {**config, **settings}
