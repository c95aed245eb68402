"""Phone numbers whose digit groups are separated by spaces: `415 555 0134`, `020 7946 0958`.

A run of space-separated digit groups is a phone number when its shape is one (North American
3-3-4, a national number with trunk prefix 0, `+44 (0)20 ...`), or when a cue word stands right
before it ("Phone:", "Tel.", "call me at") and it is not a date. Runs are taken whole: a table
row, a date with a time, a list of chapter numbers is one run, and no phone is cut out of it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import pairwise

# Whole runs only: not glued to a word, a `+`, a currency sign, a decimal or a longer run. The
# first character is consumed before the look-behinds test the one before it, so that the regex
# engine can skip to the next `(`, `+` or digit (a leading look-behind makes it try every place).
RUN = re.compile(
    r"""[(+0-9](?<![\w+$€£¥\#-].)(?<!\d[.,:/].)(?<!\d\ .)
    (?:(?<=\+)(?P<cc>\d{1,3}\ ?\(0\)\ ?)(?:\(\d{2,5}\)|\d{1,8})  # +44 (0)20 7946 0958
      |(?<=\()\d{2,5}\)\ \d{1,8}(?=\ \d)                     # (020) 7946 0958
      |(?<=\d)(?=(?:\ ?\d){6})\d{0,7})                        # 415 555 0134: 7 digits or more
    (?:\ \d{1,8})+
    (?![\w+])(?![.,:/-]\d)(?!\ \d)""",
    re.VERBOSE | re.ASCII,
)
_REACH = len("+123 (0)12345678 ")  # the farthest a run's first " <digit>" ends from its start
_PEEK = 16  # occurrences of a character looked at before RUN takes over
_GAP = re.compile(r"\d \d", re.ASCII)
_SHORT = 300  # characters: below, one regex scan for the first gap beats ten single finds
_GROUP = re.compile(r"\d+", re.ASCII)
_CUE_BEFORE = re.compile(
    r"""(?i:\b(?:tel(?:ephone)?|phone|ph|mob(?:ile)?|cell(?:phone)?|fax|whats\ ?app|call|dial)
    (?:\s+(?:me|us))?(?:\s+(?:at|on))?                    # call me at, call us on
    (?:\s*(?:no|nr|number|\#))?\.?(?:\s+is)?\s*[:.\#]?\s*)$  # Phone number is, Tel. No.:""",
    re.VERBOSE,
)
# Words after which a shaped run is something else: `Main numbers 04 11 13 39 42`.
_NOT_PHONE_BEFORE = re.compile(
    r"(?i:\b(?:numbers|draws?|lotto|lottery|balls|results?|scores?|isbn|chapters?|pages?|pp)\W*)$"
)
# The last word of every cue: a cheap test before the regex.
# fmt: off
_CUE_ENDS = frozenset((
    "tel", "telephone", "phone", "ph", "mob", "mobile", "cell", "cellphone", "fax", "whatsapp",
    "app", "call", "dial", "me", "us", "at", "on", "no", "nr", "number", "is",
))
# fmt: on
_NUMBER = re.compile(r"[\d.,:;/%+()-]*\d[\d.,:;/%+()-]*", re.ASCII)
_WINDOW = 32
_NATIONAL_DIGITS = range(10, 13)
_CUED_DIGITS = range(7, 16)
_E164_DIGITS = range(8, 16)


def runs(text: str) -> Iterator[re.Match[str]]:
    """Every RUN in the text, searched for from a little before its first `5 5` (each has one)."""
    if len(text) < _SHORT:
        gap = _GAP.search(text)
        first = len(text) if gap is None else gap.start()
    else:
        first = len(text)
        for digit in "0123456789":
            first = _first_gap(text, digit, first)
    return iter(()) if first == len(text) else RUN.finditer(text, max(0, first + 2 - _REACH))


def _first_gap(text: str, digit: str, end: int) -> int:
    """Where `digit` is first followed by a space and a digit before `end` (else `end`), or less.

    Single-character finds run at memchr speed, far faster than any regex over prose, whose
    digits are few; after `_PEEK` occurrences the answer is the last one seen (a lower bound).
    """
    at = text.find(digit, 0, end)
    for _ in range(_PEEK):
        if at < 0:
            return end
        if text[at + 1 : at + 2] == " " and text[at + 2 : at + 3].isdigit():
            return at
        at = text.find(digit, at + 1, end)
    return end if at < 0 else at


def is_phone(match: re.Match[str]) -> bool:
    """A run shaped like a phone number, or one after a cue word; never a date."""
    value = match.group()
    if value[0] == "+":  # +44 (0)20 7946 0958
        return sum(map(len, _GROUP.findall(value))) in _E164_DIGITS
    groups = value.split(" ")
    parenthesized = value[0] == "("
    if parenthesized:
        groups[0] = groups[0][1:-1]
    digits = sum(map(len, groups))
    if digits not in _CUED_DIGITS or _date(groups):
        return False
    before = match.string[max(0, match.start() - _WINDOW) : match.start()]
    if _north_american(groups) or _national(groups, parenthesized):
        ordinary = _NOT_PHONE_BEFORE.search(before) is not None or _table_row(match)
        return not ordinary or _cued(before)
    return _cued(before)


def _cued(before: str) -> bool:
    """A cue word ends the text before the run: `Phone: `, `Tel. `, `call me at `."""
    words = before.rstrip(" \t\r\n:.#").rsplit(None, 1)
    if not words or words[-1].lstrip("([{'\"").lower() not in _CUE_ENDS:
        return False
    return _CUE_BEFORE.search(before) is not None


def _table_row(match: re.Match[str]) -> bool:
    """The run is a line of its own next to a line of other numbers: a row of a table."""
    text, start, end = match.string, match.start(), match.end()
    first, last = text.rfind("\n", 0, start) + 1, _line_end(text, end)
    if text[first:start].strip() or text[end:last].strip():
        return False
    above = text[text.rfind("\n", 0, max(0, first - 1)) + 1 : max(0, first - 1)]
    below = text[last + 1 : _line_end(text, last + 1)]
    return any(_other_numbers(line) for line in (above, below))


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


def _other_numbers(line: str) -> bool:
    """Two numbers or more, after at most two words (`Standings: 14 10 31 55`), and no phone."""
    words = line.split()
    numbers = [w.strip("()") for w in words if _NUMBER.fullmatch(w)]
    if len(numbers) < max(2, len(words) - 2):
        return False
    if not all(n.isdigit() for n in numbers):  # 0.25 1.5 -3: no phone
        return True
    return not (_north_american(numbers) or _national(numbers, parenthesized=False))


def _north_american(groups: list[str]) -> bool:
    """3-3-4, maybe after a 1: area code and exchange start with 2-9 (`555 123 4567` is not)."""
    if len(groups) == 4 and groups[0] == "1":
        groups = groups[1:]
    widths = [len(g) for g in groups]
    return widths == [3, 3, 4] and groups[0][0] >= "2" and groups[1][0] >= "2"


def _national(groups: list[str], parenthesized: bool) -> bool:
    """Trunk prefix 0 then the area code (`020 7946 0958`, `01 42 68 53 00`, `(02) 9876 5432`)."""
    first, rest = groups[0], groups[1:]
    if not (2 <= len(first) <= 5 and first[0] == "0" and first[1] != "0"):
        return False
    if sum(map(len, groups)) not in _NATIONAL_DIGITS or len(groups) > 5:
        return False
    widths = [len(g) for g in rest]
    if len(rest) == 1:  # 07700 900123, 089 12345678; not two postcodes (02134 02138)
        return 6 <= widths[0] <= 8
    return all(2 <= w <= 4 for w in widths) and (parenthesized or not _counting(groups))


def _counting(groups: list[str]) -> bool:
    """Four or more groups of one width in equal rising steps: `01 02 03 04 05`, `05 10 15 20`."""
    if len(groups) < 4 or len({len(g) for g in groups}) != 1:
        return False
    steps = {int(b) - int(a) for a, b in pairwise(groups)}
    return len(steps) == 1 and steps.pop() > 0


def _date(groups: list[str]) -> bool:
    """Day, month and year in either order (`12 03 2024`, `2024 03 12`), maybe with a time."""
    if len(groups) < 3:
        return False
    a, b, c = groups[:3]
    if len(c) == 4 and len(a) <= 2 and len(b) <= 2:
        return _day_month(int(a), int(b)) and _year(int(c))
    return (
        len(a) == 4 and len(b) <= 2 and len(c) <= 2 and _year(int(a)) and _day_month(int(b), int(c))
    )


def _day_month(a: int, b: int) -> bool:
    return 1 <= min(a, b) <= 12 and 1 <= max(a, b) <= 31


def _year(y: int) -> bool:
    return 1000 <= y <= 2999
