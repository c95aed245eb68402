"""PII scrubbing: golden input -> output strings, disabled kinds, and zero residue on a corpus."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from corpus_assets.core.config import PiiSpec
from corpus_assets.core.text.pii import KINDS, Scrubber

SCRUB = Scrubber(PiiSpec())

CHANGED = [
    ("Write to alice.bob12@example.com now.", "Write to <EMAIL> now."),
    ("alice+newsletter@mail.example.org", "<EMAIL>"),
    ("Ask First.Last@sub.corp.example.co.uk.", "Ask <EMAIL>."),
    ("(write to erin.ivan7@uni.example.edu)", "(write to <EMAIL>)"),
    ("a@b.io, c_d@e-f.com; x%y@z.net", "<EMAIL>, <EMAIL>; <EMAIL>"),
    ("the server at 8.8.8.8.", "the server at <IP_ADDRESS>."),
    ("(the server at 93.184.216.34)", "(the server at <IP_ADDRESS>)"),
    ("ping 1.2.3.4 twice", "ping <IP_ADDRESS> twice"),
    ("resolver 2001:4860:4860::8888 answers", "resolver <IP_ADDRESS> answers"),
    ("host 2606:2800:220:1:248:1893:25c8:1946", "host <IP_ADDRESS>"),
    ("url http://[2a00:1450:4001:82b::200e]:443/", "url http://[<IP_ADDRESS>]:443/"),
    ("mapped ::ffff:8.8.8.8 here", "mapped <IP_ADDRESS> here"),
    ("call (555) 123-4567 today", "call <PHONE> today"),
    ("call (555)123-4567", "call <PHONE>"),
    ("call 555-123-4567.", "call <PHONE>."),
    ("call 555.123.4567", "call <PHONE>"),
    ("call +1 555 123 4567", "call <PHONE>"),
    ("call +1-555-123-4567", "call <PHONE>"),
    ("call +1 (555) 123-4567", "call <PHONE>"),
    ("call 1-800-555-1234", "call <PHONE>"),
    ("London +44 20 7946 0958, Berlin +49 30 1234567", "London <PHONE>, Berlin <PHONE>"),
    ("Paris +33 1 23 45 67 89 or +14155552671", "Paris <PHONE> or <PHONE>"),
    (
        "Mail bob@example.com or call (555) 123-4567 from 8.8.8.8.",
        "Mail <EMAIL> or call <PHONE> from <IP_ADDRESS>.",
    ),
]

UNCHANGED = [
    "On 2023-01-15 at 10:30 we met; the talk ran 10:30-11:45, or 12:30:45 exactly.",
    "In 1999, 12,000 people paid $1,234.56 each, and 3.5% more in 2000.",
    "Upgrade to version 1.2.3.4 today, or ver. 2.0.0.1, or v1.2.3.4, or build 10.0.19041.1.",
    "Python 3.11.7 and release 4.5.6 and 1.2.3.4.5.",
    "Gateway 192.168.1.1, DNS 10.0.0.53, host 172.16.0.9, localhost 127.0.0.1.",
    "Link-local 169.254.10.20, any 0.0.0.0, broadcast 255.255.255.255, multicast 224.0.0.1.",
    "Documentation uses 192.0.2.15, 203.0.113.7 and 2001:db8::8a2e:370:7334.",
    "Not an address: 192.168.1.300 or 999.1.1.1 or 01.02.03.04.",
    "Loopback ::1, link-local fe80::1ff:fe23:4567:890a, unique local fd12:3456:789a::1.",
    "ACT III. SCENE 2. Act 3, Scene 2, lines 10-20.",
    "HAMLET.\nTo be, or not to be, that is the question:\nWhether 'tis nobler in the mind.",
    "ISBN 978-3-16-148410-0 and ISBN 0-306-40615-2 and SSN-like 123-45-6789.",
    "Dial 911, or the bare number 5551234567, or 555 123 4567 without a country code.",
    "std::vector<int> and Foo::bar() and cafe::bad; ratios 3:2:1 and 16:9.",
    "Not emails: user@localhost, @handle, a@b, me at example dot com.",
    "Temperatures rose +12 degrees; the score was +1 2.",
    "Too short +1234567, too long +1234567890123456789.",
    "Dates 15.01.2023, 01/15/2023 and 2023.01.15; chapter 12.3.4.",
]


@pytest.mark.parametrize(("text", "expected"), CHANGED)
def test_golden_replacements(text: str, expected: str) -> None:
    assert SCRUB.scrub(text)[0] == expected


@pytest.mark.parametrize("text", UNCHANGED)
def test_golden_non_pii_is_left_alone(text: str) -> None:
    assert SCRUB.scrub(text) == (text, dict.fromkeys(KINDS, 0))
    assert SCRUB.find(text) == []


def test_counts_have_every_kind() -> None:
    text = "a@b.io c@d.io 8.8.8.8 2001:4860:4860::8888 10.0.0.1 call 555-123-4567"
    assert SCRUB.scrub(text) == (
        "<EMAIL> <EMAIL> <IP_ADDRESS> <IP_ADDRESS> 10.0.0.1 call <PHONE>",
        {"email": 2, "ip": 2, "phone": 1},
    )
    assert SCRUB.scrub("plain prose") == ("plain prose", {"email": 0, "ip": 0, "phone": 0})


def test_find_lists_what_scrub_replaces() -> None:
    text = "ip 10.0.0.1 / 8.8.8.8, mail a@b.io, call +44 20 7946 0958"
    assert SCRUB.find(text) == [
        ("email", "a@b.io"),
        ("ip", "8.8.8.8"),
        ("phone", "+44 20 7946 0958"),
    ]


@pytest.mark.parametrize(("text", "expected"), CHANGED)
def test_scrubbing_is_idempotent(text: str, expected: str) -> None:
    assert SCRUB.scrub(expected) == (expected, dict.fromkeys(KINDS, 0))
    assert SCRUB.find(expected) == []


TEXT = "Mail bob@example.com or call (555) 123-4567 from 8.8.8.8."


@pytest.mark.parametrize(
    ("spec", "expected", "counts"),
    [
        (
            PiiSpec(email=False),
            "Mail bob@example.com or call <PHONE> from <IP_ADDRESS>.",
            (0, 1, 1),
        ),
        (PiiSpec(ip=False), "Mail <EMAIL> or call <PHONE> from 8.8.8.8.", (1, 0, 1)),
        (PiiSpec(phone=False), "Mail <EMAIL> or call (555) 123-4567 from <IP_ADDRESS>.", (1, 1, 0)),
        (PiiSpec(enabled=False, email=True), TEXT, (0, 0, 0)),
    ],
)
def test_disabled_kinds_are_left_alone(
    spec: PiiSpec, expected: str, counts: tuple[int, int, int]
) -> None:
    assert Scrubber(spec).scrub(TEXT) == (expected, dict(zip(KINDS, counts, strict=True)))


def test_generated_corpus_has_no_residue(tmp_path: Path, make_corpus_script: Path) -> None:
    out = tmp_path / "bench"
    subprocess.run(
        [sys.executable, str(make_corpus_script), "--out", str(out), "--mb", "1"],
        check=True,
        capture_output=True,
    )
    injected = json.loads((out / "truth.json").read_text(encoding="utf-8"))["pii"]
    values = {v["value"] for found in injected.values() for v in found}
    residue, changed_clean = [], []
    for part in sorted(out.glob("part-*.jsonl")):
        for line in part.read_text(encoding="utf-8").splitlines():
            doc = json.loads(line)
            clean = SCRUB.scrub(doc["text"])[0]
            residue += [v for v in values if v in clean]
            if doc["id"] not in injected and not any(v in doc["text"] for v in values):
                changed_clean += [doc["id"]] if clean != doc["text"] else []
    assert len(values) >= 10
    assert residue == []
    assert changed_clean == []
