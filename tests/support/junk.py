"""Web junk and boilerplate, generated: the negative class of a small quality classifier."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

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
