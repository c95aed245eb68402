"""Exact answers for the arithmetic recipe: canonical strings, boxed-response parsing."""

from __future__ import annotations

import re
from fractions import Fraction

_NUMBER = re.compile(r"[-+]?(\d+(\.\d+)?|\.\d+)")
_RATIO = re.compile(r"([-+]?\d+)/(\d+)")
_FRAC = re.compile(r"([-+]?)\\[dt]?frac\{([-+]?\d+)\}\{(\d+)\}")
_GROUPED = re.compile(r"[-+]?\d{1,3}(,\d{3})+(\.\d+)?")
_BOX = "\\boxed{"
_MAX_ANSWER_CHARS = 64  # longer strings are never a right answer (and int() caps digits)


def format_answer(value: Fraction) -> str:
    """`value` written canonically: `-3`, `2.25` (terminating, no trailing zeros), else `-3/4`."""
    if value.denominator == 1:
        return str(value.numerator)
    digits = _decimal_digits(value.denominator)
    if digits is None:
        return f"{value.numerator}/{value.denominator}"
    scaled = abs(value.numerator) * 10**digits // value.denominator
    whole, frac = divmod(scaled, 10**digits)
    sign = "-" if value < 0 else ""
    return f"{sign}{whole}.{str(frac).rjust(digits, '0')}"


def _decimal_digits(denominator: int) -> int | None:
    """The fewest decimal digits `1/denominator` needs (the last is never 0), or None."""
    twos = fives = 0
    while denominator % 2 == 0:
        denominator //= 2
        twos += 1
    while denominator % 5 == 0:
        denominator //= 5
        fives += 1
    return max(twos, fives) if denominator == 1 else None


def parse_answer(text: str, *, allow_percent: bool = False) -> Fraction | None:
    """The exact value of an answer (`3/4`, `0.75`, `1,000`, `$5`, `\\frac{3}{4}`), or None."""
    value = text.strip().strip("$").strip()
    if len(value) > _MAX_ANSWER_CHARS:
        return None
    if allow_percent:
        value = _strip_percent(value)
    if _GROUPED.fullmatch(value):
        value = value.replace(",", "")
    if _NUMBER.fullmatch(value):
        return Fraction(value)
    ratio = _RATIO.fullmatch(value)
    if ratio and int(ratio.group(2)) != 0:
        return Fraction(int(ratio.group(1)), int(ratio.group(2)))
    frac = _FRAC.fullmatch(value)
    if frac and int(frac.group(3)) != 0:
        sign = -1 if frac.group(1) == "-" else 1
        return sign * Fraction(int(frac.group(2)), int(frac.group(3)))
    return None


def _strip_percent(value: str) -> str:
    """`value` without one trailing `%` or `\\%`."""
    for suffix in ("\\%", "%"):
        if value.endswith(suffix):
            return value[: -len(suffix)].strip()
    return value


def boxed_matches(response: object, expected: Fraction, *, allow_percent: bool = False) -> bool:
    """The verifier: the last `\\boxed{...}` of `response` holds exactly `expected`.

    Accepted inside the box: an integer, a decimal, `a/b`, `\\frac{a}{b}` or `\\dfrac{a}{b}`,
    each with an optional sign in front, compared as exact rationals (`0.5` = `1/2` =
    `\\frac{1}{2}`; `0.3333` is not `1/3`). Expressions are not evaluated; no box is wrong.
    """
    if not isinstance(response, str):
        return False
    boxed = last_boxed(response)
    got = None if boxed is None else parse_answer(boxed, allow_percent=allow_percent)
    return got is not None and got == expected


def last_boxed(response: str) -> str | None:
    """The content of the last complete `\\boxed{...}` in `response` (nested braces), or None."""
    start = response.rfind(_BOX)
    while start != -1:
        content = _balanced(response, start + len(_BOX))
        if content is not None:
            return content
        start = response.rfind(_BOX, 0, start)
    return None


def _balanced(text: str, begin: int) -> str | None:
    """The text from `begin` up to the brace that closes the one just before it, or None."""
    depth = 1
    for index in range(begin, len(text)):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            depth -= 1
            if depth == 0:
                return text[begin:index]
    return None
