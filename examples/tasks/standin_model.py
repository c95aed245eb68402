"""A STAND-IN for a real model evaluation of the arithmetic recipe's tasks: NOT a model.

It lets the calibrated path run end to end without a model: it writes report files
in the format the `recorded_responses` calibrator reads (corpus_assets/recipes/
arithmetic_calibration.py), one per (batch, repeat), for the public tasks of a job folder.

It reads only `work/batch-N-public.jsonl` (public tasks, never references) and solves each
problem from its public `values` with a small solver per stream. It then "slips" on purpose,
deterministically per (trial id, task id) through sha256: with a per-family skill probability
it answers right, else it answers the right value plus 1, and about 3% of attempts time out
(`failure_reason: "timeout"`, `response: null`). So over two repeats some tasks are right in
both, some once, some never. Same inputs and options, same files, byte for byte.

    python examples/tasks/standin_model.py JOB_FOLDER OUTPUT_FOLDER --repeats 2
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from corpus_assets.core.store.atomic import atomic_writer
from corpus_assets.recipes.arith_answers import format_answer

PUBLIC_FILE = re.compile(r"batch-(\d+)-public\.jsonl")
TIMEOUT_RATE = 0.03
SKILL: dict[str, float] = {  # the chance of answering right, per family
    "fractions": 0.7,
    "percentages": 0.75,
    "linear_equations": 0.6,
    "gcd_lcm": 0.8,
    "remainders": 0.65,
    "unit_conversion": 0.85,
    "counting": 0.55,
    "averages": 0.8,
}
Values = Mapping[str, Any]

SOLVERS: dict[str, Callable[[Values], Fraction]] = {
    "fractions/sum": lambda v: Fraction(v["a"], v["b"]) + Fraction(v["c"], v["d"]),
    "fractions/of_quantity": lambda v: Fraction(v["a"], v["b"]) * v["n"],
    "percentages/percent_of": lambda v: Fraction(v["p"] * v["n"], 100),
    "percentages/percent_change": lambda v: Fraction(v["b"] - v["a"], v["a"]) * 100,
    "linear_equations/one_side": lambda v: Fraction(v["c"] - v["b"], v["a"]),
    "linear_equations/two_sides": lambda v: Fraction(v["d"] - v["b"], v["a"] - v["c"]),
    "gcd_lcm/gcd_tiles": lambda v: Fraction(math.gcd(v["a"], v["b"])),
    "gcd_lcm/lcm_buses": lambda v: Fraction(math.lcm(v["a"], v["b"])),
    "remainders/share": lambda v: Fraction(v["n"] % v["k"]),
    "remainders/power": lambda v: Fraction(pow(v["a"], v["e"], v["m"])),
    "unit_conversion/laps": lambda v: Fraction(v["metres"] * v["laps"], 1000),
    "unit_conversion/speed": lambda v: Fraction(v["speed"] * v["minutes"], 60),
    "counting/committees": lambda v: Fraction(math.comb(v["n"], v["k"])),
    "counting/podium": lambda v: Fraction(math.perm(v["n"], v["k"])),
    "averages/mean": lambda v: Fraction(sum(v["scores"]), len(v["scores"])),
    "averages/missing": lambda v: Fraction(v["mean"] * (len(v["known"]) + 1) - sum(v["known"])),
}


class StandinError(Exception):
    """A job folder or public task the stand-in cannot use."""


def solve(task: Mapping[str, Any]) -> Fraction:
    """The exact answer of a public task, from its `values` and its stream's solver."""
    stream = task["metadata"]["stream"]
    if stream not in SOLVERS:
        raise StandinError(f"task {task['task_id']}: no stand-in solver for stream {stream!r}")
    return SOLVERS[stream](task["input"]["values"])


def unit_draw(trial_id: str, task_id: str, purpose: str) -> float:
    """A deterministic draw in [0, 1) for one attempt and one purpose, from sha256."""
    digest = hashlib.sha256(f"standin\0{purpose}\0{trial_id}\0{task_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def attempt(task: Mapping[str, Any], trial_id: str, *, slips: bool = True) -> dict[str, Any]:
    """One result row: solved, then (with `slips`) timed out or wrong by the trial's draws."""
    task_id = task["task_id"]
    if slips and unit_draw(trial_id, task_id, "timeout") < TIMEOUT_RATE:
        return {"task_id": task_id, "response": None, "failure_reason": "timeout", "score": 0.0}
    answer = solve(task)
    right = not slips or unit_draw(trial_id, task_id, "slip") < SKILL[task["metadata"]["family"]]
    value = answer if right else answer + 1
    response = f"Working from the numbers given, the answer is \\boxed{{{format_answer(value)}}}"
    return {
        "task_id": task_id,
        "response": response,
        "failure_reason": None,
        "score": 1.0 if right else 0.0,
    }


def public_batches(job: Path) -> list[tuple[int, Path]]:
    """The job's `work/batch-N-public.jsonl` files by batch number, else StandinError."""
    work = job / "work"
    found = sorted(
        (int(match.group(1)), path)
        for path in work.glob("batch-*-public.jsonl")
        if (match := PUBLIC_FILE.fullmatch(path.name))
    )
    if not found:
        raise StandinError(f"no work/batch-N-public.jsonl files in job folder {job}")
    return found


def read_tasks(path: Path) -> list[dict[str, Any]]:
    """The public tasks of one file in order; a row with a reference is refused, not read."""
    tasks = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise StandinError(f"{path}:{number}: not JSON ({exc})") from None
        if not isinstance(row, dict) or "reference" in row:
            raise StandinError(f"{path}:{number}: not a public task (a reference must not be here)")
        if not isinstance(row.get("task_id"), str) or "values" not in row.get("input", {}):
            raise StandinError(f"{path}:{number}: a public task needs task_id and input.values")
        tasks.append(row)
    return tasks


def report(
    tasks: Sequence[Mapping[str, Any]], batch: int, repeat: int, identity: Mapping[str, str]
) -> dict[str, Any]:
    """One report file's content: identity, trial, batch, repeat, results in task order."""
    trial_id = f"standin-b{batch}-r{repeat}"
    return {
        **identity,
        "trial_id": trial_id,
        "batch": batch,
        "repeat": repeat,
        "results": [attempt(task, trial_id) for task in tasks],
    }


def own_digest() -> str:
    """The default backend model digest: `sha256:` of the stand-in's "weights" (its skill per
    family and timeout rate) as canonical JSON, so editing its prose changes nothing."""
    weights = json.dumps({"skill": SKILL, "timeout_rate": TIMEOUT_RATE}, sort_keys=True)
    return "sha256:" + hashlib.sha256(weights.encode("utf-8")).hexdigest()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line: job folder, output folder, repeats and the four identity strings."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job", type=Path, help="job folder holding work/batch-N-public.jsonl")
    parser.add_argument("output", type=Path, help="folder for batch-N-repeat-R.json reports")
    parser.add_argument("--repeats", type=int, default=2, help="reports per batch (default 2)")
    parser.add_argument("--model-ref", default="standin-model-v1")
    parser.add_argument("--harness-ref", default="standin-harness-v1")
    parser.add_argument("--backend-model-digest", default=own_digest())
    parser.add_argument("--verifier-digest", default="boxed-verifier-v1")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Write the reports; 0 when done, 1 (with a message on stderr) when the job is unusable."""
    args = parse_args(argv)
    try:
        write_reports(args)
    except StandinError as exc:
        sys.stderr.write(f"standin_model: {exc}\n")
        return 1
    return 0


def write_reports(args: argparse.Namespace) -> None:
    """One report per (batch, repeat) for every public batch file of the job."""
    identity = {
        "model_ref": args.model_ref,
        "harness_ref": args.harness_ref,
        "backend_model_digest": args.backend_model_digest,
        "verifier_digest": args.verifier_digest,
    }
    args.output.mkdir(parents=True, exist_ok=True)
    for batch, path in public_batches(args.job):
        tasks = read_tasks(path)
        for repeat in range(args.repeats):
            text = json.dumps(report(tasks, batch, repeat, identity), indent=2) + "\n"
            with atomic_writer(args.output / f"batch-{batch}-repeat-{repeat}.json", 0o644) as fh:
                fh.write(text.encode("utf-8"))


if __name__ == "__main__":
    raise SystemExit(main())
