"""The arithmetic recipe's eight families, two sentence structures each: sixteen streams."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class Problem:
    """One generated problem: its text, the operands it was built from, the exact answer."""

    text: str
    values: dict[str, int | list[int]]
    answer: Fraction


Builder = Callable[[random.Random], Problem]


def _proper(rng: random.Random) -> tuple[int, int]:
    """A proper fraction's numerator and denominator (2..12), not necessarily reduced."""
    den = rng.randint(2, 12)
    return rng.randint(1, den - 1), den


def _plus(value: int) -> str:
    """`+ 5` or `- 5`: a signed term after another term."""
    return f"+ {value}" if value >= 0 else f"- {-value}"


def _times_x(coefficient: int) -> str:
    """`3x`, `x` or `-x`."""
    return {1: "x", -1: "-x"}.get(coefficient, f"{coefficient}x")


def fractions_sum(rng: random.Random) -> Problem:
    """a/b + c/d as a reduced fraction."""
    (a, b), (c, d) = _proper(rng), _proper(rng)
    text = (
        f"Mia drank {a}/{b} of a litre of juice in the morning and {c}/{d} of a litre in the "
        "afternoon. How many litres did she drink in total?"
    )
    return Problem(text, {"a": a, "b": b, "c": c, "d": d}, Fraction(a, b) + Fraction(c, d))


def fractions_of(rng: random.Random) -> Problem:
    """a/b of n."""
    (a, b), n = _proper(rng), rng.randint(2, 200)
    text = f"A tank holds {n} litres and is {a}/{b} full. How many litres of water are in it?"
    return Problem(text, {"a": a, "b": b, "n": n}, Fraction(a, b) * n)


def percent_of(rng: random.Random) -> Problem:
    """p percent of n."""
    p, n = rng.randint(1, 99), rng.randint(10, 500)
    text = (
        f"A farmer harvests {n} kg of apples and sells {p}% of them. How many kilograms are sold?"
    )
    return Problem(text, {"p": p, "n": n}, Fraction(p * n, 100))


def percent_change(rng: random.Random) -> Problem:
    """The percent increase from a to b."""
    a = rng.randint(10, 200)
    b = a + rng.randint(1, 200)
    text = f"A price rises from ${a} to ${b}. By what percent did the price increase?"
    return Problem(text, {"a": a, "b": b}, Fraction(b - a, a) * 100)


def linear_one_side(rng: random.Random) -> Problem:
    """x in a*x + b = c."""
    a, b, c = rng.choice([-1, 1]) * rng.randint(2, 12), rng.randint(-50, 50), rng.randint(-99, 99)
    text = f"Solve for x: {_times_x(a)} {_plus(b)} = {c}. What is x?"
    return Problem(text, {"a": a, "b": b, "c": c}, Fraction(c - b, a))


def linear_two_sides(rng: random.Random) -> Problem:
    """x in a*x + b = c*x + d, with a != c."""
    a, c = rng.sample(range(1, 13), 2)
    b, d = rng.randint(-40, 40), rng.randint(-40, 40)
    text = f"Solve for x: {_times_x(a)} {_plus(b)} = {_times_x(c)} {_plus(d)}. What is x?"
    return Problem(text, {"a": a, "b": b, "c": c, "d": d}, Fraction(d - b, a - c))


def gcd_tiles(rng: random.Random) -> Problem:
    """gcd(a, b) as the largest square tile for an a-by-b floor."""
    unit = rng.randint(1, 12)
    a, b = unit * rng.randint(2, 30), unit * rng.randint(2, 30)
    text = (
        f"A floor measures {a} cm by {b} cm. What is the side, in cm, of the largest square "
        "tile that covers it exactly with whole tiles?"
    )
    return Problem(text, {"a": a, "b": b}, Fraction(math.gcd(a, b)))


def lcm_buses(rng: random.Random) -> Problem:
    """lcm(a, b) as the next time two buses leave together."""
    a, b = rng.sample(range(4, 41), 2)
    text = (
        f"One bus leaves every {a} minutes and another every {b} minutes. They both leave now. "
        "After how many minutes do they next leave together?"
    )
    return Problem(text, {"a": a, "b": b}, Fraction(math.lcm(a, b)))


def remainder_share(rng: random.Random) -> Problem:
    """n mod k as sweets left over."""
    k, n = rng.randint(3, 15), rng.randint(20, 500)
    text = (
        f"{n} sweets are shared equally among {k} children, each getting as many as possible. "
        "How many sweets are left over?"
    )
    return Problem(text, {"n": n, "k": k}, Fraction(n % k))


def remainder_power(rng: random.Random) -> Problem:
    """a**e mod m."""
    a, e, m = rng.randint(2, 20), rng.randint(2, 12), rng.randint(3, 17)
    text = f"What is the remainder when {a}^{e} is divided by {m}?"
    return Problem(text, {"a": a, "e": e, "m": m}, Fraction(pow(a, e, m)))


def units_laps(rng: random.Random) -> Problem:
    """laps * metres / 1000 kilometres."""
    metres, laps = rng.randint(100, 800), rng.randint(2, 25)
    text = f"A track is {metres} metres long. A runner completes {laps} laps. How many kilometres?"
    return Problem(text, {"metres": metres, "laps": laps}, Fraction(metres * laps, 1000))


def units_speed(rng: random.Random) -> Problem:
    """speed km/h for minutes: distance in km."""
    speed, minutes = rng.randint(20, 120), rng.randint(5, 150)
    text = f"A car drives at {speed} km/h for {minutes} minutes. How many kilometres does it cover?"
    return Problem(text, {"speed": speed, "minutes": minutes}, Fraction(speed * minutes, 60))


def counting_committees(rng: random.Random) -> Problem:
    """C(n, k)."""
    n = rng.randint(5, 16)
    k = rng.randint(2, min(6, n - 1))
    text = f"In how many ways can a committee of {k} be chosen from {n} people?"
    return Problem(text, {"n": n, "k": k}, Fraction(math.comb(n, k)))


def counting_podium(rng: random.Random) -> Problem:
    """P(n, k): ordered places."""
    n = rng.randint(4, 12)
    k = rng.randint(2, min(4, n - 1))
    text = (
        f"{n} runners race and the first {k} places get different prizes. In how many ways "
        "can the prizes be awarded?"
    )
    return Problem(text, {"n": n, "k": k}, Fraction(math.perm(n, k)))


def average_mean(rng: random.Random) -> Problem:
    """The mean of a few scores."""
    scores = [rng.randint(40, 100) for _ in range(rng.randint(3, 7))]
    listed = ", ".join(str(score) for score in scores)
    text = f"A student's test scores are {listed}. What is the average score?"
    return Problem(text, {"scores": scores}, Fraction(sum(scores), len(scores)))


def average_missing(rng: random.Random) -> Problem:
    """The last of n numbers whose mean is given."""
    known = [rng.randint(1, 60) for _ in range(rng.randint(2, 6))]
    mean = rng.randint(10, 60)
    listed = ", ".join(str(number) for number in known)
    text = (
        f"The average of {len(known) + 1} numbers is {mean}. {len(known)} of them are {listed}. "
        "What is the remaining number?"
    )
    answer = Fraction(mean * (len(known) + 1) - sum(known))
    return Problem(text, {"mean": mean, "known": known}, answer)


FAMILIES: dict[str, tuple[tuple[str, Builder], tuple[str, Builder]]] = {
    "fractions": (("sum", fractions_sum), ("of_quantity", fractions_of)),
    "percentages": (("percent_of", percent_of), ("percent_change", percent_change)),
    "linear_equations": (("one_side", linear_one_side), ("two_sides", linear_two_sides)),
    "gcd_lcm": (("gcd_tiles", gcd_tiles), ("lcm_buses", lcm_buses)),
    "remainders": (("share", remainder_share), ("power", remainder_power)),
    "unit_conversion": (("laps", units_laps), ("speed", units_speed)),
    "counting": (("committees", counting_committees), ("podium", counting_podium)),
    "averages": (("mean", average_mean), ("missing", average_missing)),
}


@dataclass(frozen=True)
class Stream:
    """One independently seeded stream: a family and one of its structures."""

    family: str
    structure: str
    build: Builder

    @property
    def name(self) -> str:
        """`family/structure`."""
        return f"{self.family}/{self.structure}"


# First structures of every family, then the second ones: a short round-robin covers families.
STREAMS: tuple[Stream, ...] = tuple(
    Stream(family, pair[slot][0], pair[slot][1])
    for slot in (0, 1)
    for family, pair in FAMILIES.items()
)
