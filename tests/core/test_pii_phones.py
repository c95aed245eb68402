"""Phone numbers with spaces between the digit groups: golden strings, and numbers left alone."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corpus_assets.core.config import PiiSpec
from corpus_assets.core.text import spaced_phones
from corpus_assets.core.text.pii import KINDS, Scrubber

SCRUB = Scrubber(PiiSpec())

FORMATS = [
    ("North American", "415 555 0134"),
    ("North American, area code in parentheses", "(415) 555 0134"),
    ("North American, +1", "+1 415 555 0134"),
    ("North American, 1", "1 415 555 0134"),
    ("UK London", "020 7946 0958"),
    ("UK London, +44", "+44 20 7946 0958"),
    ("UK London, +44 (0)", "+44 (0)20 7946 0958"),
    ("UK Manchester", "0161 496 0000"),
    ("UK mobile", "07700 900123"),
    ("UK mobile, +44", "+44 7700 900123"),
    ("France", "01 42 68 53 00"),
    ("France, +33", "+33 1 42 68 53 00"),
    ("Germany, Berlin", "030 1234 5678"),
    ("Germany, +49", "+49 30 1234 5678"),
    ("Germany, Cologne", "0221 1234 5678"),
    ("Australia", "02 9876 5432"),
    ("Australia, area code in parentheses", "(02) 9876 5432"),
    ("Australia mobile", "0412 345 678"),
    ("Australia, +61", "+61 2 9876 5432"),
    ("India, +91", "+91 98765 43210"),
    ("Netherlands", "020 123 4567"),
    ("Japan", "03 1234 5678"),
]
SENTENCES = [
    ("You can reach the office on {} during the week.", "office on <PHONE> during"),
    ("Her number, {}, was on the card.", "Her number, <PHONE>, was"),
    ("{} is the number to ring.", "<PHONE> is the number"),
    ("The clinic ({}) opens at nine.", "clinic (<PHONE>) opens"),
    ("Call {}.", "Call <PHONE>."),
]
CUES = ["Phone: ", "Tel. ", "tel:", "call me at ", "ph. ", "Tel.: ", "Phone number is ", "Fax "]


@pytest.mark.parametrize(("name", "phone"), FORMATS, ids=[n for n, _ in FORMATS])
@pytest.mark.parametrize(("template", "tail"), SENTENCES, ids=["on", "comma", "first", "(", "end"])
def test_every_format_inside_sentences(name: str, phone: str, template: str, tail: str) -> None:
    expected = template.format("<PHONE>")
    assert tail in expected
    assert SCRUB.scrub(template.format(phone)) == (expected, {"email": 0, "ip": 0, "phone": 1})
    assert SCRUB.find(template.format(phone)) == [("phone", phone)]


@pytest.mark.parametrize(("name", "phone"), FORMATS, ids=[n for n, _ in FORMATS])
@pytest.mark.parametrize("cue", CUES)
def test_every_format_after_cue_words(name: str, phone: str, cue: str) -> None:
    assert SCRUB.scrub(f"{cue}{phone}")[0] == f"{cue}<PHONE>"
    assert SCRUB.scrub(f"Office: {cue}{phone} (weekdays)")[0] == f"Office: {cue}<PHONE> (weekdays)"


CUED = [
    ("Phone: 98765 43210", "Phone: <PHONE>"),
    ("call me at 555 0134 after six", "call me at <PHONE> after six"),
    ("Tel. 12 34 56 78", "Tel. <PHONE>"),
    ("Mobile: 0049 171 1234567", "Mobile: <PHONE>"),
    ("ph. 612 345 678.", "ph. <PHONE>."),
    ("Telephone No. 2345 6789", "Telephone No. <PHONE>"),
    ("WhatsApp 98765 43210", "WhatsApp <PHONE>"),
    ("dial 0800 123 456 free", "dial <PHONE> free"),
    ("Phone:\n98765 43210\n", "Phone:\n<PHONE>\n"),
    ("The dog ran home (call 98765 43210). Then", "The dog ran home (call <PHONE>). Then"),
    ('He said "call me at 555 0134" and left', 'He said "call me at <PHONE>" and left'),
]


@pytest.mark.parametrize(("text", "expected"), CUED)
def test_cue_words_admit_local_and_other_groupings(text: str, expected: str) -> None:
    assert SCRUB.scrub(text)[0] == expected


MIXED = [
    (
        "Alice: 415 555 0134, alice@example.com; Bob: +44 20 7946 0958 or 8.8.8.8.",
        "Alice: <PHONE>, <EMAIL>; Bob: <PHONE> or <IP_ADDRESS>.",
    ),
    ("London 020 7946 0958 / Paris 01 42 68 53 00", "London <PHONE> / Paris <PHONE>"),
    ("Dashed 555-123-4567 and spaced 415 555 0134", "Dashed <PHONE> and spaced <PHONE>"),
    ("020 7946 0958", "<PHONE>"),
    ("Tel.\n020 7946 0958\n", "Tel.\n<PHONE>\n"),
    ("Alice\n415 555 0134\nBob\n415 555 0199", "Alice\n<PHONE>\nBob\n<PHONE>"),
    ("Helplines:\n415 555 0134\n020 7946 0958\n", "Helplines:\n<PHONE>\n<PHONE>\n"),
    ("Totals\n\n550 438 6622\n\n12 13", "Totals\n\n<PHONE>\n\n12 13"),
    ("Chapter 3\n415 555 0134\nPage 12", "Chapter 3\n<PHONE>\nPage 12"),
    ("Bob: 415 555 0199\n415 555 0134", "Bob: <PHONE>\n<PHONE>"),
]


@pytest.mark.parametrize(("text", "expected"), MIXED)
def test_spaced_phones_beside_other_pii(text: str, expected: str) -> None:
    assert SCRUB.scrub(text)[0] == expected


def test_a_phone_far_into_a_text_with_many_digits_before_it() -> None:
    head = "Act 1, scene 2. " + "In 1599 they played 11 times, 1 or 2 a week; ref 0123456789. " * 40
    text = head + "Box office: 020 7946 0958. " + "The end of act 5 came at 11. " * 20
    assert SCRUB.scrub(text)[0] == text.replace("020 7946 0958", "<PHONE>")
    assert SCRUB.find(text) == [("phone", "020 7946 0958")]


def test_only_the_number_after_a_cue_is_replaced_and_output_is_stable() -> None:
    text = "Phone: 415 555 0134. Tel. 98765 43210, fax 030 1234 5678"
    out = "Phone: <PHONE>. Tel. <PHONE>, fax <PHONE>"
    assert [SCRUB.scrub(text) for _ in range(3)] == [(out, {"email": 0, "ip": 0, "phone": 3})] * 3
    assert SCRUB.find(text) == [
        ("phone", "415 555 0134"),
        ("phone", "98765 43210"),
        ("phone", "030 1234 5678"),
    ]
    assert SCRUB.scrub(out) == (out, dict.fromkeys(KINDS, 0))


def test_spaced_phones_are_kept_when_phones_are_off() -> None:
    text = "Phone: 415 555 0134, or 020 7946 0958"
    assert Scrubber(PiiSpec(phone=False)).scrub(text)[0] == text
    assert Scrubber(PiiSpec(enabled=False)).scrub(text)[0] == text


UNCHANGED = [
    # dates and times
    "Signed on 12 03 2024 and filed 2024 03 12.",
    "Born 3 12 1987, married 01 06 2010 14 30.",
    "Timestamp 2024 03 12 14 30 15",
    "The meeting is at 14 30, the train at 09 45 and 10 15.",
    "Tel. 12 03 2024 is a date, not a number.",
    "We will call on 12 03 2024 14 30.",
    # scores and sports results
    "The score was 3 2 after extra time; sets 6 4 3 6 7 6.",
    "Lakers 112 Celtics 108, a 21 15 21 18 win in the final.",
    "Standings: 38 25 8 5 83 points, goals 71 33.",
    "Innings 312 8 declared, follow-on 145 10.",
    # prices and counts
    "The house sold for 1 250 000 kr; the budget was 12 345 678 CHF.",
    "Population 8 336 817 (2022), up from 8 175 133.",
    "Price: € 1 234,50 incl. VAT, or $ 12 500 000 raised in 2021.",
    # tables of numbers
    "Year Q1 Q2 Q3 Q4\n2021 415 555 0134 12\n2022 020 7946 0958 3\n",
    "12 345 6789 1234 56 7\n234 567 8901 2345 67 8",
    "01 02 03 04 05 06 07\n08 09 10 11 12 13 14",
    "10 20 30\n550 438 6622\n608 723 736\n",
    "Q3\n12.5 7 -3\n550 438 6622",
    "Rates\n0.2 0.4 0.6 0.8\n020 7946 0958\n",
    "Standings: 14 10 31 55\n494 866 1138\nISBN 978 5 123 45678 9",
    "Row: 01 02 03 04 05",
    "Steps: 05 10 15 20 25",
    # invoices, accounts, identifiers
    "Invoice 2024 00042, order 1234 5678, card 4111 1111 1111 1111.",
    "IBAN DE89 3704 0044 0532 0130 00, sort code 20 00 00, account 12345678.",
    "ISBN 978 0 306 40615 7 and ISBN 0 306 40615 2.",
    "Postcodes 02134 02138 and 94103 94107; 75008 Paris.",
    "VAT GB123 4567 89 and ref. 123 456 789.",
    # lotteries, chapters, versions, long digit runs
    "Winning numbers 4 12 23 35 41 49, bonus 7.",
    "Main numbers 04 11 13 39 42, stars 02 09.",
    "Chapter 12 13 14, pages 101 102 103, John 3 16, Psalm 23 1 6.",
    "Version 2 0 1, build 10 0 19041, release 1.2.3 4.",
    "A run of digits 41555501345678 and 0207946095812345 is no phone.",
    "12345678901 23456789012 34567890123",
    "Serial 415 555 0134 123456789 and 020 7946 0958 1234567890x.",
    "Located at 51 30 26 N 0 7 39 W.",
    "Between 1999 2000 2001 and 2002 the count was 120 000.",
    "North American shapes that are not: 555 123 4567, 123 456 7890, 415 155 0134.",
    "Glued: x020 7946 0958, v415 555 0134, 3.020 7946 0958, 12,415 555 0134.",
    "Too long +44 20 7946 0958 1234 5678 and +1 2.",
    "Ph.D. 1999 2000, in Tel Aviv 2024 2025.",
]


@pytest.mark.parametrize("text", UNCHANGED)
def test_ordinary_numbers_are_left_alone(text: str) -> None:
    assert SCRUB.scrub(text) == (text, dict.fromkeys(KINDS, 0))
    assert SCRUB.find(text) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The cue line is a row of numbers until its phone is replaced.
        ("-312 (Tel. 98765 415\n020 20240958\n", "-312 (Tel. <PHONE>\n<PHONE>\n"),
        # `+44` follows a digit until the phone before it is replaced.
        ("555-123-4567+44 7946 020 123", "<PHONE><PHONE>"),
    ],
)
def test_scrubbing_twice_changes_nothing_more(text: str, expected: str) -> None:
    once = SCRUB.scrub(text)
    assert once[0] == expected
    assert SCRUB.scrub(once[0]) == (expected, dict.fromkeys(KINDS, 0))


PIECES = [
    "0", "01", "020", "7946", "0958", "415", "555", "0134", "98765", "43210", "2024", "03", "12",
    "1", "(0)", "(02)", "+44", "+1", "(", ")", "-3", "12.5", "0.2 0.4 0.6 0.8", "555-123-4567",
    "Phone: ", "Tel.", "call me at ", "numbers ", "ISBN ", "a@b.io", "8.8.8.8", "x", "é", "²",
    "020 7946 0958", "415 555 0134", "10 20 30",
]  # fmt: skip


@settings(max_examples=1000, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(PIECES), st.sampled_from(["", " ", "\n"])), max_size=16))
def test_any_mix_of_numbers_scrubs_without_error_and_stays_scrubbed(
    pieces: list[tuple[str, str]],
) -> None:
    text = "".join(piece + gap for piece, gap in pieces)
    out, counts = SCRUB.scrub(text)
    assert sum(counts.values()) == len(SCRUB.find(text))
    assert SCRUB.scrub(out) == (out, dict.fromkeys(KINDS, 0))


@settings(max_examples=1000, derandomize=True, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(PIECES), st.sampled_from(["", " ", "\n"])), max_size=16),
    st.sampled_from([0, 150, 400]),
)
def test_runs_finds_what_a_scan_of_the_whole_text_finds(
    pieces: list[tuple[str, str]], padding: int
) -> None:
    """Short texts are searched with one regex, long ones from the first gap the single-character
    finds see: both find every run a scan from the start finds, and no other."""
    text = "word " * (padding // 5) + "".join(piece + gap for piece, gap in pieces)
    spans = [m.span() for m in spaced_phones.runs(text)]
    assert spans == [m.span() for m in spaced_phones.RUN.finditer(text)]
