"""Write web.jsonl: generated web pages for the quality-classifier examples (README.md here).

    python examples/quality/make_web.py [--pages 800] [--seed 0]

The pages are what a crawl is full of and a quality classifier learns to push down: navigation
and cookie boilerplate, shop listings, SEO spam, link farms, and short forum chatter. Seeded,
so the file is the same on every machine (its sha256 is pinned in the example configs).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
NAV = ["Home", "About", "Contact", "Blog", "Shop", "Login", "Sign up", "FAQ", "Privacy", "Terms"]
THINGS = ["shoes", "phone cases", "vitamins", "car insurance", "loans", "sunglasses", "watches"]
CITIES = ["Springfield", "Riverton", "Lakeside", "Fairview", "Georgetown", "Madison"]
SPAM = [
    "Best cheap {thing} deals {year}!!! Buy now and save up to {n}% off.",
    "Top {n} {thing} in {city} - compare prices, read reviews, order online today.",
    "Click here for free {thing}. Limited offer, hurry up! Free shipping on orders over ${n}.",
    "{thing} {thing} {thing} discount coupon code promo {year} {city} near me",
    "Get instant approval for {thing}. No credit check. Call now!",
]
BOILER = [
    "We use cookies to improve your experience. By continuing you accept our cookie policy.",
    "Copyright {year} All rights reserved. Powered by WordPress.",
    "Subscribe to our newsletter for the latest updates and exclusive offers.",
    "Share this: Facebook Twitter Pinterest Email",
    "Posted by admin on {month} {n}, {year} | {n} comments",
    "Related posts: {thing} guide | {thing} tips | {thing} review",
]
CHAT = [
    "lol same here",
    "anyone know how to fix this??",
    "thx!!",
    "bump",
    "+1 this worked for me",
    "idk man",
    "where can i buy {thing} in {city}",
    "first!!!",
    "this site is down again?",
]
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def fill(rng: random.Random, template: str) -> str:
    return template.format(
        thing=rng.choice(THINGS),
        city=rng.choice(CITIES),
        year=rng.randint(2015, 2025),
        n=rng.randint(2, 99),
        month=rng.choice(MONTHS),
    )


def page(rng: random.Random) -> str:
    """One page: a navigation bar, a body of one kind, a footer."""
    nav = " | ".join(rng.sample(NAV, rng.randint(4, 8)))
    kind = rng.choice(["spam", "listing", "forum", "links"])
    if kind == "spam":
        body = [fill(rng, rng.choice(SPAM)) for _ in range(rng.randint(4, 12))]
    elif kind == "listing":
        body = [
            f"{fill(rng, '{thing}').title()} model {rng.randint(100, 999)} - ${rng.randint(5, 500)}"
            f".{rng.randint(0, 99):02d} - Add to cart"
            for _ in range(rng.randint(5, 15))
        ]
    elif kind == "forum":
        body = [f"user{rng.randint(1, 9999)}: {fill(rng, rng.choice(CHAT))}" for _ in range(8)]
    else:
        body = [f"{fill(rng, '{thing}')} {fill(rng, '{city}')} >>" for _ in range(20)]
    footer = [fill(rng, line) for line in rng.sample(BOILER, rng.randint(2, 4))]
    return "\n".join([nav, *body, *footer])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=800)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    lines = [
        json.dumps({"id": f"web-{i:05d}", "text": page(rng)}) + "\n" for i in range(args.pages)
    ]
    (HERE / "web.jsonl").write_text("".join(lines), encoding="utf-8")


if __name__ == "__main__":
    main()
