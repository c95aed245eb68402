"""The boxed-answer verifier: every accepted form of a value matches it exactly, nothing else does.

Property tests write a random rational in each accepted form (integer, decimal, `a/b`,
`\\frac{a}{b}`, `\\dfrac{a}{b}`, each with an optional sign in front, inside prose with other
boxes and nested braces) and check the verifier accepts it, and rejects nearby values, evaluated
expressions and responses without a box. Golden tests pin the tricky strings.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corpus_assets.recipes.arith_answers import boxed_matches

values = st.fractions(max_denominator=10_000).filter(lambda v: abs(v) < 10**6)
multipliers = st.integers(min_value=1, max_value=9)
prose = st.text(alphabet="abc xyz.,;:()=", max_size=30)


def _signed(value: Fraction, body: str, explicit_plus: bool) -> str:
    """`body` (the absolute value written out) with the sign in front."""
    if value < 0:
        return "-" + body
    return ("+" if explicit_plus else "") + body


def _terminating(value: Fraction) -> bool:
    d = value.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1


def _decimal(value: Fraction, extra_zeros: int) -> str:
    """The exact decimal expansion of a terminating `value`, with trailing zeros added."""
    digits = 0
    while (abs(value) * 10**digits).denominator != 1:
        digits += 1
    scaled = int(abs(value) * 10**digits)
    whole, frac = divmod(scaled, 10**digits)
    tail = (str(frac).rjust(digits, "0") if digits else "") + "0" * extra_zeros
    return f"{whole}.{tail}" if tail else str(whole)


def _box(inner: str, before: str, after: str) -> str:
    return f"{before} \\boxed{{7}} then {{nested {{braces}}}} \\boxed{{{inner}}}{after}"


@given(values, multipliers, st.booleans(), prose, prose)
def test_a_ratio_in_any_terms_matches(
    value: Fraction, k: int, plus: bool, before: str, after: str
) -> None:
    body = f"{abs(value.numerator) * k}/{value.denominator * k}"
    assert boxed_matches(_box(_signed(value, body, plus), before, after), value)


@given(values, multipliers, st.sampled_from(["frac", "dfrac"]), st.booleans(), prose)
def test_a_latex_fraction_matches(
    value: Fraction, k: int, command: str, plus: bool, before: str
) -> None:
    body = f"\\{command}{{{abs(value.numerator) * k}}}{{{value.denominator * k}}}"
    assert boxed_matches(_box(_signed(value, body, plus), before, ""), value)


@given(values.filter(_terminating), st.integers(0, 3), st.booleans(), prose)
def test_an_exact_decimal_or_integer_matches(
    value: Fraction, zeros: int, plus: bool, before: str
) -> None:
    written = _signed(value, _decimal(value, zeros), plus)
    assert boxed_matches(_box(written, before, ""), value)


@given(values.filter(lambda v: not _terminating(v)), st.integers(1, 12))
def test_a_rounded_decimal_of_a_repeating_value_does_not_match(
    value: Fraction, digits: int
) -> None:
    rounded = round(value, digits)
    written = _decimal(Fraction(rounded), 0) if rounded >= 0 else "-" + _decimal(-rounded, 0)
    assert Fraction(rounded) != value
    assert not boxed_matches(f"\\boxed{{{written}}}", value)


@given(values, st.fractions(max_denominator=100).filter(lambda d: d != 0))
def test_another_value_does_not_match(value: Fraction, delta: Fraction) -> None:
    other = value + delta
    body = f"{abs(other.numerator)}/{other.denominator}"
    assert not boxed_matches(f"\\boxed{{{_signed(other, body, False)}}}", value)


@given(st.integers(-1000, 1000), st.integers(1, 1000), st.sampled_from(["+", "-", "*"]))
def test_expressions_are_not_evaluated(a: int, b: int, op: str) -> None:
    value = {"+": a + b, "-": a - b, "*": a * b}[op]
    assert not boxed_matches(f"\\boxed{{{a}{op}{b}}}", Fraction(value))


@given(values, prose)
def test_no_box_is_wrong(value: Fraction, before: str) -> None:
    assert not boxed_matches(f"{before} the answer is {value}", value)


@pytest.mark.parametrize(
    ("response", "expected", "correct"),
    [
        ("\\boxed{0.5}", "1/2", True),
        ("\\boxed{\\frac{1}{2}}", "0.5", True),
        ("\\boxed{\\dfrac{2}{4}}", "1/2", True),
        ("\\boxed{-\\frac{3}{4}}", "-3/4", True),
        ("\\boxed{+\\frac{3}{4}}", "3/4", True),
        ("\\boxed{-3/4}", "-3/4", True),
        ("\\boxed{.5}", "1/2", True),
        ("\\boxed{0.3333}", "1/3", False),
        ("\\boxed{0.33333333333333333333}", "1/3", False),
        ("\\boxed{1+2}", "3", False),
        ("\\boxed{\\frac{1}{0}}", "0", False),
        ("\\boxed{3/-4}", "-3/4", False),
        ("\\boxed{\\frac{a}{b}}", "1", False),
        ("\\boxed{\\frac{1}{2}} and later \\boxed{0.25}", "1/4", True),
        ("\\boxed{\\frac{1}{2}} and later \\boxed{0.25}", "1/2", False),
        ("\\boxed{\\frac{1}{2}", "1/2", False),  # never closed
        ("\\boxed{{\\frac{1}{2}}}", "1/2", False),  # extra braces are not a value
        ("the answer is 1/2", "1/2", False),
        ("\\boxed{}", "0", False),
        ("\\boxed{ 7 }", "7", True),
        ("\\boxed{7.}", "7", False),
        ("\\boxed{1e3}", "1000", False),
    ],
)
def test_tricky_strings(response: str, expected: str, correct: bool) -> None:
    assert boxed_matches(response, Fraction(expected)) is correct


@pytest.mark.parametrize("response", [None, 5, 0.5, ["\\boxed{5}"], b"\\boxed{5}"])
def test_a_response_that_is_not_text_is_wrong(response: object) -> None:
    assert not boxed_matches(response, Fraction(5))
