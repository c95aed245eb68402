"""Build a benchmark corpus with known copies, near copies, partial copies, junk and PII.

    python bench/make_corpus.py --out DIR [--mb 20] [--seed 0] [--files 8] [--footers 0.02]

Writes DIR/part-NNNNN.jsonl (one {"id", "text"} object per line) and DIR/truth.json, which says
what every document is, so a build can be scored:

    unique   [id, ...]            real or generated text that is no near copy of anything earlier
    exact    {id: of}             a verbatim copy of the earlier unique document `of`
    near     {id: {of, jaccard}}  an edited copy of `of` (word 5-gram Jaccard >= 0.8, measured);
                                  with --footers, also `of` plus a footer line (a signature, a
                                  mailing-list footer, a "share this" line): {of, jaccard, footer}
    partial  {id: {of, jaccard, new}}  `of` verbatim plus one new paragraph `new` (Jaccard >= 0.8):
                                  a build that keeps partial copies keeps exactly `new` under id
    junk     {id: kind}           short, symbols, repeated_lines or long_words: no sensible
                                  quality filter keeps it
    pii      {id: [{kind, format, value}]}  emails, IPv4/IPv6 addresses and phone numbers (the
                                  exact strings) that the text of `id` holds; copies of a
                                  document hold its PII too

Every id is in exactly one of unique, exact, near, partial, junk. Unique documents are the
TinyStories stories and Shakespeare scenes of `data/` (the real ones run out at ~3.5 MB), mixed
in proportion with documents written by a seeded word-level Markov chain trained on them. Each
unique candidate is checked against every earlier unique document (MinHash-LSH over word
5-grams proposes candidates, exact Jaccard decides): a real one at Jaccard >= 0.8 is labelled a
near copy, a generated one at Jaccard >= 0.5 is thrown away and written again. The check is
this file's own code (numpy only), not the project's dedup, so the truth does not grade itself.

PII uses reserved or fictional values only: example.com/.org/.net mailboxes, North American
555-01xx lines, Ofcom's drama range 020 7946 0xxx, ARCEP's fiction range 01 99 00 xx xx,
Berlin's 030 23125 xxx; IP addresses are random public ones (documentation ranges are not PII
to the scrubber). Phones come in spaced, dashed, dotted and international forms, often after a
cue word ("Phone:", "Tel.", "call me at"). Deterministic for a given seed, size and file count.
"""

from __future__ import annotations

import argparse
import hashlib
import ipaddress
import json
import os
import random
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "data"
TINY = DATA / "tinystories" / "TinyStoriesV2-GPT4-train.head10000lines.txt"
PLAYS = DATA / "shakespeare" / "plays.jsonl"

NEAR = 0.8  # a near copy: word 5-gram Jaccard at least this
GENERATED_MAX = 0.5  # a generated document this close to an earlier one is written again
NGRAM = 5
SCENE_CHARS = 3000
RATES = {"exact": 0.05, "near": 0.05, "partial": 0.015, "junk": 0.03}
FOOTERS = [  # what mail, forums and blogs append to a text: a line of its own, 2 to 12 words
    "Sent from my iPhone",
    "-- \nAlice Smith\nSenior Editor, The Valley Gazette",
    "Share this: Twitter, Facebook, Email, Print",
    "Like this story? Share it with your friends!",
    "Posted in Stories | Leave a comment",
    "Best regards,\nBob",
    "To unsubscribe from this list, send an email to list-leave@example.org.",
    "You received this message because you are subscribed to the Readers group.",
    "Read more stories like this on our website.",
    "Tags: children, bedtime, classic, favourite",
    "Copyright 2024 The Story Club. All rights reserved.",
    "Click here to subscribe to our newsletter.",
]
PII_RATE = 0.06
WORDS_PER_PII = 80  # at most one PII value per 80 words: a real text is not mostly numbers

_WORD = re.compile(r"[0-9a-z]+|[^\x00-\x7f\u0080-\u00bf\u2000-\u207f\u3000-\u303f\s]+")


# --- the real texts ------------------------------------------------------------------------------


def stories() -> list[str]:
    """The complete TinyStories stories of the sample (its truncated tail is dropped)."""
    parts = TINY.read_text(encoding="utf-8").split("<|endoftext|>")[:-1]
    return [p.strip() for p in parts if p.strip()]


def scenes() -> list[str]:
    """The plays cut at paragraph breaks into documents of at least 3,000 characters."""
    docs: list[str] = []
    for line in PLAYS.read_text(encoding="utf-8").splitlines():
        paras = [p.strip("\n") for p in re.split(r"\n\s*\n", json.loads(line)["text"])]
        chunk: list[str] = []
        for para in (p for p in paras if p.strip()):
            chunk.append(para)
            if sum(map(len, chunk)) >= SCENE_CHARS:
                docs.append("\n\n".join(chunk))
                chunk = []
        if sum(map(len, chunk)) >= SCENE_CHARS // 6:
            docs.append("\n\n".join(chunk))
    return docs


def base_documents() -> list[str]:
    """Every real document: the stories, then the scenes."""
    return stories() + scenes()


# --- a word-level Markov chain -------------------------------------------------------------------


class Markov:
    """An order-2 chain over words, line breaks and paragraph breaks of a set of texts."""

    START, END = "\x02", "\x03"

    def __init__(self, texts: list[str]) -> None:
        self.next: dict[tuple[str, str], list[str]] = {}
        for text in texts:
            tokens = [self.START, self.START, *self.tokens(text), self.END]
            for a, b, c in zip(tokens, tokens[1:], tokens[2:], strict=False):
                self.next.setdefault((a, b), []).append(c)

    @staticmethod
    def tokens(text: str) -> Iterator[str]:
        """Words (with their punctuation), "\\n" and "\\n\\n" as tokens of their own."""
        for p, para in enumerate(re.split(r"\n\s*\n", text)):
            if p:
                yield "\n\n"
            for n, line in enumerate(para.split("\n")):
                if n:
                    yield "\n"
                yield from line.split()

    def generate(self, rng: random.Random, max_words: int) -> str:
        """One text: from a start state until the chain ends or max_words words are out."""
        state, out, words = (self.START, self.START), [], 0
        while words < max_words:
            token = rng.choice(self.next[state])
            if token == self.END:
                break
            out.append(token)
            words += token not in ("\n", "\n\n")
            state = (state[1], token)
        text = " ".join(out)
        return re.sub(r" ?(\n+) ?", r"\1", text).strip()


# --- our own near-copy check -------------------------------------------------------------------


def shingle_set(text: str) -> np.ndarray:
    """Sorted distinct crc32s of the lowercased word 5-grams (fewer words: one of all)."""
    words = _WORD.findall(text.lower())
    grams = {" ".join(words[i : i + NGRAM]) for i in range(max(1, len(words) - NGRAM + 1))}
    return np.unique(np.fromiter((zlib.crc32(g.encode()) for g in grams), dtype=np.uint64))


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Exact Jaccard of two shingle sets."""
    common = np.intersect1d(a, b, assume_unique=True).size
    return common / max(1, a.size + b.size - common)


@dataclass
class NearIndex:
    """MinHash (128 permutations) with LSH (32 bands of 4) over the unique documents so far."""

    seed: int
    bands: int = 32
    rows: int = 4
    sets: list[np.ndarray] = field(default_factory=list)
    buckets: list[dict[bytes, list[int]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        gen = np.random.default_rng(self.seed)
        n = self.bands * self.rows
        self.a = gen.integers(1, 2**32, n, dtype=np.uint64)
        self.b = gen.integers(0, 2**32, n, dtype=np.uint64)
        self.buckets = [{} for _ in range(self.bands)]

    def signature(self, shingles: np.ndarray) -> np.ndarray:
        """The minimum of each permutation (a * x + b) mod (2^61 - 1) over the shingles."""
        prime = np.uint64(2**61 - 1)
        sig: np.ndarray = ((shingles[:, None] * self.a + self.b) % prime).min(axis=0)
        return sig

    def closest(self, shingles: np.ndarray) -> tuple[int, float, np.ndarray]:
        """(index, Jaccard) of the most similar indexed candidate, (-1, 0.0) if none; the sig."""
        sig = self.signature(shingles)
        seen: set[int] = set()
        best, best_j = -1, 0.0
        for band, key in enumerate(self._keys(sig)):
            for k in self.buckets[band].get(key, ()):
                if k not in seen:
                    seen.add(k)
                    j = jaccard(shingles, self.sets[k])
                    if j > best_j:
                        best, best_j = k, j
        return best, best_j, sig

    def add(self, shingles: np.ndarray, sig: np.ndarray) -> None:
        """Index a unique document by its shingles and signature."""
        for band, key in enumerate(self._keys(sig)):
            self.buckets[band].setdefault(key, []).append(len(self.sets))
        self.sets.append(shingles)

    def _keys(self, sig: np.ndarray) -> Iterator[bytes]:
        """One bucket key per band."""
        for band in range(self.bands):
            yield sig[band * self.rows : (band + 1) * self.rows].tobytes()


# --- PII ---------------------------------------------------------------------------------------

NAMES = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy"]
DOMAINS = ["example.com", "example.org", "example.net", "mail.example.com", "corp.example.org"]
AREAS = [206, 212, 303, 312, 415, 503, 512, 617, 702, 808, 917]
PHONE_FORMATS = {
    "na_spaced": "{a} 555 {l}",
    "na_paren_spaced": "({a}) 555 {l}",
    "na_plus1_spaced": "+1 {a} 555 {l}",
    "na_paren_dashed": "({a}) 555-{l}",
    "na_dashed": "{a}-555-{l}",
    "na_dotted": "{a}.555.{l}",
    "na_1_dashed": "1-{a}-555-{l}",
    "uk_spaced": "020 7946 0{x3}",
    "uk_plus44_spaced": "+44 20 7946 0{x3}",
    "fr_spaced": "01 99 00 {x2} {y2}",
    "fr_plus33_spaced": "+33 1 99 00 {x2} {y2}",
    "de_plus49_spaced": "+49 30 2312 5{x3}",
}
CUES = {
    "email": ["Write to {v}", "Email: {v}", "Contact {v} for details", "(mail {v})"],
    "ip": ["The server at {v} stopped answering", "IP: {v}", "It logged in from {v}"],
    "phone": [
        "Phone: {v}",
        "Tel. {v}",
        "Tel: {v}",
        "Call me at {v}",
        "You can call me at {v} after six",
        "Ring {v} for tickets",
        "The number is {v}",
        "({v})",
    ],
}


def email(rng: random.Random) -> tuple[str, str]:
    """A mailbox at a reserved example domain."""
    user = f"{rng.choice(NAMES)}.{rng.choice(NAMES)}{rng.randint(1, 99)}"
    return "email", f"{user}@{rng.choice(DOMAINS)}"


def ip_address(rng: random.Random) -> tuple[str, str]:
    """A random public IPv4 (two in three) or IPv6 address."""
    while True:
        if rng.random() < 2 / 3:
            fmt, value = "ipv4", ".".join(str(rng.randint(1, 254)) for _ in range(4))
        else:
            groups = ":".join(f"{rng.randint(0, 0xFFFF):x}" for _ in range(3))
            fmt, value = "ipv6", f"2a0{rng.randint(0, 9)}:{groups}::{rng.randint(1, 0xFFF):x}"
        ip = ipaddress.ip_address(value)
        if ip.is_global and not ip.is_multicast:
            return fmt, value


def phone(rng: random.Random) -> tuple[str, str]:
    """A fictional phone number in one of PHONE_FORMATS: ("phone_<format>", number)."""
    fmt = rng.choice(sorted(PHONE_FORMATS))
    value = PHONE_FORMATS[fmt].format(
        a=rng.choice(AREAS),
        l=f"01{rng.randint(0, 99):02d}",
        x3=f"{rng.randint(0, 999):03d}",
        x2=f"{rng.randint(0, 99):02d}",
        y2=f"{rng.randint(0, 99):02d}",
    )
    return f"phone_{fmt}", value


def inject_pii(rng: random.Random, text: str) -> tuple[str, list[dict[str, str]]]:
    """1-3 PII values (one per 80 words), each a sentence of its own between two of the text."""
    sentences = text.split(". ")
    found = []
    for _ in range(min(rng.randint(1, 3), len(text.split()) // WORDS_PER_PII)):
        make = rng.choices([email, ip_address, phone], weights=[1, 1, 2])[0]
        fmt, value = make(rng)
        kind = "phone" if fmt.startswith("phone") else ("email" if fmt == "email" else "ip")
        phrase = rng.choice(CUES[kind]).format(v=value)
        sentences.insert(rng.randint(0, max(0, len(sentences) - 1)), phrase)
        found.append({"kind": kind, "format": fmt.removeprefix("phone_"), "value": value})
    return ". ".join(sentences), found


# --- copies and junk ---------------------------------------------------------------------------

FILLERS = ["the", "a", "very", "and", "then", "so"]


def near_copy(rng: random.Random, text: str) -> str:
    """About 2% of the words (none holding a digit or @) replaced, and a header line."""
    words = text.split(" ")
    plain = [i for i, w in enumerate(words) if not any(c.isdigit() or c == "@" for c in w)]
    for i in rng.sample(plain, max(1, len(words) // 50)):
        words[i] = rng.choice(FILLERS)
    return "Reposted: " + " ".join(words)


def footer_copy(rng: random.Random, text: str) -> tuple[str, str]:
    """(text, footer): `text` with a footer line appended, at the end of its last paragraph
    (one line break) or as a paragraph of its own (a blank line)."""
    footer = rng.choice(FOOTERS)
    return text + rng.choice(["\n", "\n\n"]) + footer, footer


def junk(rng: random.Random, real: list[str]) -> tuple[str, str]:
    """(kind, text) of a document no sensible quality filter keeps."""
    kind = rng.choice(["short", "symbols", "repeated_lines", "long_words"])
    if kind == "short":
        return kind, rng.choice(["ok", "Click here.", "lol", "Read more", "Page three of seven"])
    if kind == "symbols":
        return kind, "".join(rng.choice("#$%&*@!{}[]<>|~^") for _ in range(rng.randint(200, 800)))
    if kind == "long_words":
        letters = "abcdefghijklmnopqrstuvwxyz"
        words = ["".join(rng.choices(letters, k=rng.randint(14, 30))) for _ in range(60)]
        return kind, " ".join(words)
    lines = [ln for ln in rng.choice(real).split("\n") if len(ln.split()) >= 3] or ["Subscribe now"]
    return kind, "\n".join([rng.choice(lines)] * rng.randint(30, 80))


# --- the corpus ----------------------------------------------------------------------------------


@dataclass
class Corpus:
    """The documents so far and what each one is."""

    seed: int
    docs: list[tuple[str, str]] = field(default_factory=list)
    truth: dict[str, Any] = field(default_factory=dict)
    unique: list[int] = field(default_factory=list)  # positions in docs
    exact_keys: set[str] = field(default_factory=set)
    size: int = 0

    def __post_init__(self) -> None:
        self.truth = {k: {} for k in ("exact", "near", "partial", "junk", "pii")}
        self.truth["unique"] = []
        self.index = NearIndex(self.seed)

    def add(self, text: str, label: str, info: Any, pii: list[dict[str, str]]) -> None:
        """Append a document with its label, what truth says of it, and the PII it holds."""
        doc_id = f"doc-{len(self.docs):08d}"
        if label == "unique":
            self.truth["unique"].append(doc_id)
            self.unique.append(len(self.docs))
        else:
            self.truth[label][doc_id] = info
        held = [p for p in pii if p["value"] in text]
        if held:
            self.truth["pii"][doc_id] = held
        self.docs.append((doc_id, text))
        self.size += len(text.encode("utf-8"))

    def pii_of(self, pos: int) -> list[dict[str, str]]:
        """The PII held by the document at position pos (a copy holds it too)."""
        return list(self.truth["pii"].get(self.docs[pos][0], []))


def exact_key(text: str) -> str:
    """The text with whitespace collapsed, hashed: equal keys are exact copies."""
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()


def add_unique(c: Corpus, rng: random.Random, text: str, generated: bool) -> bool:
    """Add a candidate unique document; False when a generated one was too close (not added)."""
    key = exact_key(text)
    shingles = shingle_set(text)
    best, j, sig = c.index.closest(shingles)
    if generated and (j >= GENERATED_MAX or key in c.exact_keys):
        return False
    if key in c.exact_keys or j >= NEAR:
        of = c.docs[c.unique[best]][0]
        label = "exact" if key in c.exact_keys else "near"
        c.add(text, label, of if label == "exact" else {"of": of, "jaccard": round(j, 3)}, [])
        return True
    pii: list[dict[str, str]] = []
    if rng.random() < PII_RATE:
        text, pii = inject_pii(rng, text)
    c.exact_keys.add(key)
    c.index.add(shingles, sig)
    c.add(text, "unique", None, pii)
    return True


def add_copy(c: Corpus, rng: random.Random, kind: str, chains: dict[str, Markov]) -> bool:
    """An exact, near or partial copy of an earlier unique document; False if none fit."""
    pos = rng.choice(c.unique)
    of, original = c.docs[pos]
    if kind == "exact":
        c.add(original, "exact", of, c.pii_of(pos))
        return True
    if kind == "footer":
        text, footer = footer_copy(rng, original)
        j = jaccard(shingle_set(original), shingle_set(text))
        if j < NEAR + 0.02:
            return False
        info = {"of": of, "jaccard": round(j, 3), "footer": footer}
        c.add(text, "near", info, c.pii_of(pos))
        return True
    if kind == "near":
        text = near_copy(rng, original)
        j = jaccard(shingle_set(original), shingle_set(text))
        if j < NEAR + 0.02:
            return False
        c.add(text, "near", {"of": of, "jaccard": round(j, 3)}, c.pii_of(pos))
        return True
    words = len(original.split())
    if words < 150:
        return False
    chain = chains["plays" if "\n\n" in original else "stories"]
    new = chain.generate(rng, max(20, words // 8)).replace("\n\n", "\n")
    text = f"{original}\n\n{new}" if rng.random() < 0.5 else f"{new}\n\n{original}"
    j = jaccard(shingle_set(original), shingle_set(text))
    if j < NEAR + 0.02 or len(new.split()) < 15:
        return False
    c.add(text, "partial", {"of": of, "jaccard": round(j, 3), "new": new}, c.pii_of(pos))
    return True


def build(mb: float, seed: int, footers: float = 0.0) -> Corpus:
    """Documents until their texts hold `mb` million bytes; `footers`: the rate of footer
    copies (0: none, and the corpus of a seed is the same as without the option)."""
    rates = {**RATES, "footer": footers}
    rng = random.Random(seed)
    real_stories, real_scenes = stories(), scenes()
    chains = {"stories": Markov(real_stories), "plays": Markov(real_scenes)}
    real = real_stories + real_scenes
    rng.shuffle(real)
    left = sum(len(t.encode()) for t in real)
    target = int(mb * 1_000_000)
    c = Corpus(seed)
    while c.size < target:
        kind = pick(rng, rates)
        if kind == "junk":
            junk_kind, text = junk(rng, real_stories)
            c.add(text, "junk", junk_kind, [])
        elif kind != "unique":
            if c.unique:
                add_copy(c, rng, kind, chains)
        elif real and rng.random() < left / max(1, target - c.size):
            text = real.pop()  # real text in proportion to what is left of it
            left -= len(text.encode())
            add_unique(c, rng, text, generated=False)
        else:
            add_unique(c, rng, generated_text(rng, chains), generated=True)
    return c


def pick(rng: random.Random, rates: dict[str, float]) -> str:
    """What the next document is: a copy, junk or unique, by `rates`."""
    roll, total = rng.random(), 0.0
    for kind, rate in rates.items():
        total += rate
        if roll < total:
            return kind
    return "unique"


def generated_text(rng: random.Random, chains: dict[str, Markov]) -> str:
    """A story (120-450 words) or a scene (about 520 words) from the chains, 40 words or more."""
    while True:
        if rng.random() < 0.4:
            text = chains["plays"].generate(rng, 520)
        else:
            text = chains["stories"].generate(rng, rng.choice([120, 200, 300, 450]))
        if len(text.split()) >= 40:
            return text


def write(c: Corpus, out: Path, files: int, mb: float) -> dict[str, Any]:
    """The part files and truth.json; returns the summary printed on stdout."""
    out.mkdir(parents=True, exist_ok=True)
    per_file = -(-len(c.docs) // files)
    for f in range(files):
        rows = c.docs[f * per_file : (f + 1) * per_file]
        body = "".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in rows)
        _write_atomic(out / f"part-{f:05d}.jsonl", body)
    truth = {
        "generator": "bench/make_corpus.py",
        "seed": c.seed,
        "mb": mb,
        "documents": len(c.docs),
        "bytes": c.size,
        **c.truth,
    }
    _write_atomic(out / "truth.json", json.dumps(truth, indent=1, ensure_ascii=False) + "\n")
    summary = {k: (len(v) if isinstance(v, list | dict) else v) for k, v in truth.items()}
    summary["pii_values"] = sum(len(v) for v in c.truth["pii"].values())
    return summary


def _write_atomic(path: Path, text: str) -> None:
    """Write a temporary file, fsync it, rename it into place."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--mb", type=float, default=20.0, help="total size of the texts, in MB")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--footers", type=float, default=0.0, help="rate of footer copies (near)")
    args = ap.parse_args()
    if args.mb <= 0 or args.files < 1 or not 0 <= args.footers < 0.5:
        ap.error(
            f"--mb {args.mb}, --files {args.files}, --footers {args.footers}: "
            "allowed --mb > 0, --files >= 1, 0 <= --footers < 0.5"
        )
    corpus = build(args.mb, args.seed, args.footers)
    print(json.dumps(write(corpus, args.out, args.files, args.mb)))


if __name__ == "__main__":
    main()
