"""Seeded text for bench_pii.py: number-heavy documents with no PII, and sentences with phones."""

from __future__ import annotations

import random
from collections.abc import Callable

R = random.Random


def _d(rng: R, n: int) -> str:
    """n random digits."""
    return "".join(rng.choice("0123456789") for _ in range(n))


def _n(rng: R, lo: int, hi: int) -> str:
    return str(rng.randint(lo, hi))


def _nanp(rng: R) -> str:
    return f"{_n(rng, 2, 9)}{_d(rng, 2)} {_n(rng, 2, 9)}{_d(rng, 2)} {_d(rng, 4)}"


def _pairs(rng: R, n: int) -> str:
    return " ".join(_d(rng, 2) for _ in range(n))


# Format name -> (a random phone in that format, whether it needs a cue word to be found).
FORMATS: dict[str, tuple[Callable[[R], str], bool]] = {
    "NANP 415 555 0134": (_nanp, False),
    "NANP (415) 555 0134": (lambda r: "({}) {} {}".format(*_nanp(r).split()), False),
    "NANP +1 415 555 0134": (lambda r: "+1 " + _nanp(r), False),
    "NANP 1 415 555 0134": (lambda r: "1 " + _nanp(r), False),
    "UK 020 7946 0958": (lambda r: f"020 {_n(r, 3, 8)}{_d(r, 3)} {_d(r, 4)}", False),
    "UK 0161 496 0000": (lambda r: f"01{_n(r, 1, 9)}1 {_d(r, 3)} {_d(r, 4)}", False),
    "UK 07700 900123": (lambda r: f"07{_d(r, 3)} {_d(r, 6)}", False),
    "UK +44 20 7946 0958": (lambda r: f"+44 20 {_n(r, 3, 8)}{_d(r, 3)} {_d(r, 4)}", False),
    "UK +44 7700 900123": (lambda r: f"+44 7{_d(r, 3)} {_d(r, 6)}", False),
    "UK +44 (0)20 7946 0958": (lambda r: f"+44 (0)20 {_n(r, 3, 8)}{_d(r, 3)} {_d(r, 4)}", False),
    "FR 01 42 68 53 00": (lambda r: f"0{_n(r, 1, 9)} {_pairs(r, 4)}", False),
    "FR +33 1 42 68 53 00": (lambda r: f"+33 {_n(r, 1, 9)} {_pairs(r, 4)}", False),
    "DE 030 1234 5678": (lambda r: f"030 {_d(r, 4)} {_d(r, 4)}", False),
    "DE 0221 1234 5678": (lambda r: f"0{_n(r, 2, 9)}{_d(r, 2)} {_d(r, 4)} {_d(r, 4)}", False),
    "DE +49 30 1234 5678": (lambda r: f"+49 30 {_d(r, 4)} {_d(r, 4)}", False),
    "AU 02 9876 5432": (lambda r: f"0{r.choice('2378')} {_d(r, 4)} {_d(r, 4)}", False),
    "AU (02) 9876 5432": (lambda r: f"(0{r.choice('2378')}) {_d(r, 4)} {_d(r, 4)}", False),
    "AU 0412 345 678": (lambda r: f"04{_d(r, 2)} {_d(r, 3)} {_d(r, 3)}", False),
    "AU +61 2 9876 5432": (lambda r: f"+61 {r.choice('2378')} {_d(r, 4)} {_d(r, 4)}", False),
    "IN +91 98765 43210": (lambda r: f"+91 {_n(r, 6, 9)}{_d(r, 4)} {_d(r, 5)}", False),
    "IN cue 98765 43210": (lambda r: f"{_n(r, 6, 9)}{_d(r, 4)} {_d(r, 5)}", True),
    "local cue 555 0134": (lambda r: f"{_n(r, 2, 9)}{_d(r, 2)} {_d(r, 4)}", True),
    "DK/NO cue 12 34 56 78": (lambda r: f"{_n(r, 2, 9)}{_d(r, 1)} {_pairs(r, 3)}", True),
}
BARE = [
    "You can reach the office on {} during the week.",
    "Her number, {}, was written on the card.",
    "The clinic ({}) opens at nine.",
    "Leave a message at {}",
    "{} is the number to ring.",
    "Offices: {}; open Monday to Friday.",
]
CUED = [
    "Phone: {}",
    "Tel. {}",
    "tel:{}",
    "Tel.: {} (office)",
    "For bookings call me at {} after six.",
    "ph. {}",
    "Phone number: {}.",
    "Mobile {}, email below.",
    "Fax: {}",
    "Call us on {} today.",
    "My phone number is {} if you need it.",
    "Telephone No. {}",
    "The dog ran home (call {}). Then it slept.",
    '"Call us on {}," she said.',
]


def phone_sentences(rng: R, n: int) -> list[tuple[str, str, str, str]]:
    """n (format, text, phone, expected output) cases, formats in turn, bare and cued."""
    names = list(FORMATS)
    cases = []
    for i in range(n):
        fmt = names[i % len(names)]
        make, cue_only = FORMATS[fmt]
        template = rng.choice(CUED if cue_only or i % 2 else BARE)
        phone = make(rng)
        cases.append((fmt, template.format(phone), phone, template.format("<PHONE>")))
    return cases


def _row(rng: R) -> str:
    return " ".join(_n(rng, 0, 10 ** rng.randint(1, 6)) for _ in range(rng.randint(2, 8)))


def _date(rng: R) -> str:
    day, month, year = f"{rng.randint(1, 28):02d}", f"{rng.randint(1, 12):02d}", _n(rng, 1950, 2030)
    return rng.choice(
        [
            f"Signed on {day} {month} {year}.",
            f"Dated {year} {month} {day}, filed {day} {month} {year} {_n(rng, 10, 23)} 15.",
            f"Born {int(day)} {int(month)} {year} in the village.",
            f"Period {month} {year} to {month} {int(year) + 1}.",
            f"Timestamp {year} {month} {day} {_n(rng, 10, 23)} {_d(rng, 2)} {_d(rng, 2)}",
        ]
    )


def _score(rng: R) -> str:
    return rng.choice(
        [
            f"Final score {rng.randint(0, 5)} {rng.randint(0, 5)} after extra time.",
            f"Sets: {' '.join(f'{rng.randint(0, 7)} {rng.randint(0, 7)}' for _ in range(3))}.",
            f"Rally 21 {rng.randint(10, 19)} {rng.randint(10, 21)} 21 21 {rng.randint(5, 19)}",
            f"Lakers {rng.randint(80, 130)} Celtics {rng.randint(80, 130)} (OT {_n(rng, 1, 3)})",
            f"Standings: {rng.randint(1, 38)} {rng.randint(0, 30)} {rng.randint(0, 20)} "
            f"{rng.randint(0, 90)} {rng.randint(0, 99)}",
            f"Innings: {rng.randint(100, 450)} {rng.randint(1, 10)} declared, "
            f"follow-on {rng.randint(50, 300)} {rng.randint(1, 10)}",
        ]
    )


def _price(rng: R) -> str:
    big = f"{rng.randint(1, 999)} {_d(rng, 3)} {_d(rng, 3)}"
    return rng.choice(
        [
            f"Price: € {rng.randint(1, 999)} {_d(rng, 3)},{_d(rng, 2)} incl. VAT.",
            f"The house sold for {big} kr last year.",
            f"Budget {big} {_d(rng, 3)} CHF, spent {rng.randint(1, 99)} {_d(rng, 3)}.",
            f"$ {rng.randint(1, 99)} {_d(rng, 3)} {_d(rng, 3)} raised in {_n(rng, 1990, 2024)}.",
            f"Population {rng.randint(1, 99)} {_d(rng, 3)} {_d(rng, 3)} ({_n(rng, 1900, 2020)}).",
        ]
    )


def _invoice(rng: R) -> str:
    qty, unit = rng.randint(1, 99), rng.randint(1, 9999)
    return rng.choice(
        [
            f"Invoice {_n(rng, 2015, 2025)} {_d(rng, 5)}, order {_d(rng, 4)} {_d(rng, 4)}",
            f"Item {_d(rng, 6)}  qty {qty}  unit {unit}  total {qty * unit}",
            f"IBAN DE{_d(rng, 2)} {_d(rng, 4)} {_d(rng, 4)} {_d(rng, 4)} {_d(rng, 4)} {_d(rng, 2)}",
            f"Card ending {_d(rng, 4)}, number {' '.join(_d(rng, 4) for _ in range(4))}",
            f"Sort code {_d(rng, 2)} {_d(rng, 2)} {_d(rng, 2)}, account {_d(rng, 8)}",
            f"Ref. {_d(rng, 3)} {_d(rng, 3)} {_d(rng, 3)}; VAT GB{_d(rng, 3)} {_d(rng, 4)} 12",
        ]
    )


def _misc(rng: R) -> str:
    a = rng.randint(1, 20)
    return rng.choice(
        [
            f"See chapters {a} {a + 1} {a + 2} and pages {a * 10} {a * 10 + 1} {a * 10 + 2}.",
            f"ISBN 978 {rng.randint(0, 9)} {_d(rng, 3)} {_d(rng, 5)} {rng.randint(0, 9)}",
            f"ISBN 0 {_d(rng, 2)} {_d(rng, 6)} {rng.randint(0, 9)}",
            f"Postcodes 0{_d(rng, 4)} 0{_d(rng, 4)} and {_d(rng, 5)} {_d(rng, 5)}.",
            f"Winning numbers {' '.join(sorted(_n(rng, 1, 49) for _ in range(6)))} bonus {a}",
            f"Draw {' '.join(f'{x:02d}' for x in sorted(rng.sample(range(1, 50), 6)))}",
            f"Main numbers {' '.join(f'{x:02d}' for x in sorted(rng.sample(range(1, 51), 5)))}, "
            f"stars {' '.join(f'{x:02d}' for x in sorted(rng.sample(range(1, 13), 2)))}",
            f"Calendar: {' '.join(f'{d:02d}' for d in range(a, a + 7))}",
            f"Located at {rng.randint(0, 89)} {rng.randint(0, 59)} {rng.randint(0, 59)} N",
            f"John {rng.randint(1, 21)} {rng.randint(1, 40)}; Psalm {rng.randint(1, 150)} 1 6",
            f"Meet at {rng.randint(10, 23)} {rng.choice(['00', '15', '30', '45'])} sharp.",
            f"Version {rng.randint(1, 9)} {rng.randint(0, 20)} {rng.randint(0, 99)}",
            f"Lap times 1 {_n(rng, 10, 59)} {_d(rng, 3)}, 1 {_n(rng, 10, 59)} {_d(rng, 3)}",
        ]
    )


KINDS = [_row, _date, _score, _price, _invoice, _misc]


def number_heavy(rng: R, n: int) -> list[str]:
    """n documents of 3 to 12 lines, each line a table row, date, score, price, invoice or other."""
    docs = []
    for _ in range(n):
        lines = [rng.choice(KINDS)(rng) for _ in range(rng.randint(3, 12))]
        docs.append("\n".join(lines))
    return docs
