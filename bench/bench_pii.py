"""Phone scrubbing: false positives on prose and number-heavy text, recall, speed vs a baseline.

    python bench/bench_pii.py [--data data] [--seed 0] [--docs 4000] [--repeat 5]
                              [--baseline b394a7e] [--check]

(a) counts replacements on the TinyStories and Shakespeare samples under --data (none expected);
(b) generates number-heavy text (tables, dates, scores, prices, invoices, sports results, ISBNs,
postcodes, lottery draws) and counts replacements (none expected); (c) generates sentences with
known phone numbers in every supported format, bare and after cue words, and reports recall and
exact output; (d) times the scrubber of --baseline (the commit before spaced phones, read from
git) and the current one on the same texts, side by side, best of --repeat. If the
`phonenumbers` package is installed it also scores and times the current scrubber with every
spaced candidate validated by libphonenumber. With --check it exits 1 on any replacement in
(a), on more than one in 2,000 number-heavy documents in (b) (a line of three numbers of 3, 3
and 4 digits between lines of words is a North American phone number to any rule), or on any
phone missed in (c).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import random
import re
import subprocess
import sys
import time
import types
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from pii_text import FORMATS, number_heavy, phone_sentences

from corpus_assets.core.config import FilterSpec, PiiSpec
from corpus_assets.core.text import pii, spaced_phones
from corpus_assets.core.text.filters import make_filter

REPO = Path(__file__).resolve().parent.parent
TINYSTORIES = Path("tinystories/TinyStoriesV2-GPT4-train.head10000lines.txt")
PLAYS = Path("shakespeare/plays.jsonl")
BASELINE = "b394a7e"  # the last commit before spaced phone numbers
NUMBER_HEAVY_BAR = 1 / 2000  # false positives per number-heavy document, at most
# Where a number without `+` may be from: those of the formats in pii_text, and a few more.
PN_REGIONS = ("US", "GB", "DE", "FR", "AU", "IN", "DK", "NO", "IT", "NL", "ES", "JP", "CH")

Scrub = Callable[[str], tuple[str, dict[str, int]]]


def tinystories(path: Path) -> list[str]:
    """The stories, split at the end-of-text marker."""
    text = path.read_text(encoding="utf-8")
    return [s.strip() for s in text.split("<|endoftext|>") if s.strip()]


def plays(path: Path) -> list[str]:
    """The text of every play in the JSONL file."""
    with path.open(encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def false_positives(scrub: Scrub, docs: list[str]) -> tuple[Counter[str], list[str]]:
    """Replacements by kind over docs that hold no PII, and up to five changed excerpts."""
    counts: Counter[str] = Counter()
    examples: list[str] = []
    for doc in docs:
        out, found = scrub(doc)
        counts.update({k: v for k, v in found.items() if v})
        if out != doc and len(examples) < 5:
            pairs = enumerate(zip(doc, out, strict=False))
            at = next((i for i, (a, b) in pairs if a != b), min(len(doc), len(out)))
            examples.append(repr(doc[max(0, at - 12) : at + 24]))
    return counts, examples


def recall(scrub: Scrub, cases: list[tuple[str, str, str, str]]) -> dict[str, tuple[int, int]]:
    """Per format: (exact outputs, cases); a case is (format, text, phone, expected output)."""
    score: dict[str, list[int]] = {}
    for fmt, text, _phone, expected in cases:
        hit = scrub(text)[0] == expected
        s = score.setdefault(fmt, [0, 0])
        s[0] += hit
        s[1] += 1
    return {k: (v[0], v[1]) for k, v in score.items()}


def throughput(scrubbers: dict[str, Scrub], docs: list[str], repeat: int) -> dict[str, float]:
    """MB per CPU-second of each scrubber over every doc, best of `repeat` interleaved rounds."""
    size = sum(len(d.encode("utf-8")) for d in docs) / 1e6
    best = dict.fromkeys(scrubbers, float("inf"))
    for _ in range(repeat):
        for label, scrub in scrubbers.items():
            start = time.process_time()
            for doc in docs:
                scrub(doc)
            best[label] = min(best[label], time.process_time() - start)
    return {label: size / seconds for label, seconds in best.items()}


def baseline_module(ref: str) -> types.ModuleType | None:
    """pii.py as of git commit `ref`, imported under its own name; None without git history."""
    proc = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{ref}:corpus_assets/core/text/pii.py"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        print(f"baseline {ref}: not in this clone's git history ({proc.stderr.strip()})")
        return None
    module = types.ModuleType("pii_baseline")
    sys.modules[module.__name__] = module  # dataclasses look their module up there
    exec(compile(proc.stdout, f"{ref}:pii.py", "exec"), module.__dict__)
    return module


def with_phonenumbers(scrubber: pii.Scrubber) -> pii.Scrubber | None:
    """The scrubber with every spaced candidate also validated by libphonenumber, if installed."""
    if importlib.util.find_spec("phonenumbers") is None:
        return None
    import phonenumbers

    def valid(value: str) -> bool:
        """Valid in some region: the number's own if it has `+`, else any of PN_REGIONS."""
        for region in (None,) if value.startswith("+") else PN_REGIONS:
            try:
                if phonenumbers.is_valid_number(phonenumbers.parse(value, region)):
                    return True
            except phonenumbers.NumberParseException:
                continue
        return False

    def swap(d: pii._Detector) -> pii._Detector:
        if d.candidates is not spaced_phones.runs:
            return d
        return dataclasses.replace(d, accept=lambda m: d.accept(m) and valid(m.group()))

    scrubber._detectors = tuple(swap(d) for d in scrubber._detectors)
    return scrubber


def report_fp(name: str, scrubbers: dict[str, Scrub], docs: list[str]) -> int:
    """Print the replacements each scrubber makes on PII-free docs; return the current one's."""
    size = sum(len(d) for d in docs) / 1e6
    print(f"\n({name}) {len(docs)} docs, {size:.2f} M chars, no PII: replacements")
    ours = 0
    for label, scrub in scrubbers.items():
        counts, examples = false_positives(scrub, docs)
        print(f"  {label:<22} {dict(counts) or 0}  {' '.join(examples)}")
        ours = sum(counts.values()) if label == "current" else ours
    return ours


def report_recall(scrubbers: dict[str, Scrub], cases: list[tuple[str, str, str, str]]) -> int:
    """Print exact-output recall per format for each scrubber; return the current one's misses."""
    scores = {label: recall(scrub, cases) for label, scrub in scrubbers.items()}
    print(f"\n(c) {len(cases)} sentences with one phone each: exact output / cases")
    print(f"  {'format':<28}" + "".join(f"{label:>22}" for label in scrubbers))
    for fmt in FORMATS:
        row = "".join(f"{_ratio(scores[label][fmt]):>22}" for label in scrubbers)
        print(f"  {fmt:<28}{row}")
    totals = [tuple(map(sum, zip(*s.values(), strict=True))) for s in scores.values()]
    print(f"  {'all':<28}" + "".join(f"{_ratio(t):>22}" for t in totals))
    missed = [(t, p) for f, t, p, e in cases if scrubbers["current"](t)[0] != e]
    for text, phone in missed[:5]:
        print(f"  missed {phone!r} in {text!r}")
    return len(missed)


def _ratio(pair: tuple[int, ...]) -> str:
    return f"{pair[0]}/{pair[1]}"


def report_speed(scrubbers: dict[str, Scrub], corpora: dict[str, list[str]], repeat: int) -> None:
    """Print MB per CPU-second of each scrubber on each corpus, and its ratio to the baseline."""
    print(f"\n(d) throughput, MB per CPU-second (best of {repeat}), ratio to baseline")
    print(f"  {'text':<22}" + "".join(f"{label:>22}" for label in scrubbers))
    for name, docs in corpora.items():
        speeds = throughput(scrubbers, docs, repeat)
        base = speeds.get("baseline")
        cells = [f"{v:.1f}" + (f" ({v / base:.2f}x)" if base else "") for v in speeds.values()]
        print(f"  {name:<22}" + "".join(f"{c:>22}" for c in cells))


def scenes(works: list[str]) -> list[str]:
    """The plays cut into documents of about 3 kB at paragraph breaks, as bench_shard's are."""
    docs = []
    for play in works:
        chunk: list[str] = []
        for para in re.split(r"\n\s*\n", play):
            chunk.append(para)
            if sum(map(len, chunk)) >= 3000:
                docs.append("\n\n".join(chunk))
                chunk = []
    return docs


def bench_corpus(prose: list[str], sentences: list[str]) -> list[str]:
    """bench_shard-like documents: prose, one in 14 with a phone sentence put in its middle."""
    extra: Iterator[str] = iter(sentences)
    docs = []
    for i, doc in enumerate(prose):
        cut = doc.find(". ", len(doc) // 2) + 1
        docs.append(f"{doc[:cut]} {next(extra, '')}{doc[cut:]}" if i % 14 == 0 and cut else doc)
    return docs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=REPO / "data", help="folder of the samples")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--docs", type=int, default=4000, help="generated docs per kind")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--baseline", default=BASELINE, help="commit of the baseline pii.py")
    ap.add_argument("--check", action="store_true", help="exit 1 when a bar is missed")
    args = ap.parse_args()
    for rel in (TINYSTORIES, PLAYS):
        if not (args.data / rel).is_file():
            sys.exit(f"bench_pii: {args.data / rel} is missing; pass --data FOLDER holding {rel}")

    current = pii.Scrubber(PiiSpec())
    scrubbers: dict[str, Scrub] = {}
    old = baseline_module(args.baseline)
    if old is not None:
        scrubbers["baseline"] = old.Scrubber(PiiSpec()).scrub
    scrubbers["current"] = current.scrub
    validated = with_phonenumbers(pii.Scrubber(PiiSpec()))
    if validated is not None:
        scrubbers["current+phonenumbers"] = validated.scrub

    rng = random.Random(args.seed)
    stories, works = tinystories(args.data / TINYSTORIES), plays(args.data / PLAYS)
    numbers = number_heavy(rng, args.docs)
    cases = phone_sentences(rng, args.docs)
    prose_fp = report_fp("a: TinyStories", scrubbers, stories)
    prose_fp += report_fp("a: Shakespeare", scrubbers, works)
    numbers_fp = report_fp("b: number-heavy", scrubbers, numbers)
    keep = make_filter(FilterSpec())
    kept = sum(keep(doc) is None for doc in numbers)
    print(f"  the default quality filters keep {kept} of them (the shard stage scrubs only those)")
    missed = report_recall(scrubbers, cases)
    mixed = bench_corpus(stories + scenes(works), [c[1] for c in cases])
    corpora = {
        "bench-like prose": mixed,
        "TinyStories": stories,
        "Shakespeare plays": works,
        "number-heavy": numbers,
        "phone sentences": [c[1] for c in cases],
    }
    report_speed(scrubbers, corpora, args.repeat)
    failed = prose_fp or numbers_fp > NUMBER_HEAVY_BAR * len(numbers) or missed
    if args.check and failed:
        sys.exit(
            f"bench_pii: {prose_fp} replacements in prose, {numbers_fp} in {len(numbers)}"
            f" number-heavy documents (bar {NUMBER_HEAVY_BAR * len(numbers):g}), {missed} missed"
        )


if __name__ == "__main__":
    main()
