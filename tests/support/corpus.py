"""The `corpus` CLI in a fresh interpreter, run to its end or started in the background."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

Arg = str | os.PathLike[str] | int


def corpus_argv(*args: Arg) -> list[str]:
    """The argv of `corpus ARGS...` (this interpreter, `-m corpus_assets.cli`)."""
    return [sys.executable, "-m", "corpus_assets.cli", *map(str, args)]


def environment(
    env: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """`environ` (by default this process's environment) with `env` set over it."""
    return {**(os.environ if environ is None else environ), **(env or {})}


def run_corpus(
    *args: Arg,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    timeout: float = 300,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`corpus ARGS...` to its end, output captured, in `environment(env, environ)`. A non-zero
    exit fails the test with its stderr when `check`, else it is returned."""
    done = subprocess.run(
        corpus_argv(*args),
        cwd=cwd,
        env=environment(env, environ),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and done.returncode != 0:
        command = " ".join(map(str, args))
        raise AssertionError(f"corpus {command} exited {done.returncode}:\n{done.stderr}")
    return done


def start_corpus(
    *args: Arg,
    env: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    **popen: Any,
) -> subprocess.Popen[str]:
    """`corpus ARGS...` started in `environment(env, environ)`, in text mode; `popen` holds the
    other arguments of `subprocess.Popen` (stdout, stderr, cwd, start_new_session)."""
    return subprocess.Popen(corpus_argv(*args), env=environment(env, environ), text=True, **popen)


def own_instance_env() -> dict[str, str]:
    """This process's environment without DAGSTER_HOME and CORPUS_ROOT: a command run in it uses
    the Dagster instance under its own `--root`."""
    return {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "CORPUS_ROOT")}


def make_bench_corpus(out: Path, mb: float) -> Path:
    """`bench/make_corpus.py`'s synthetic corpus of about `mb` MB (seed 0), written to `out`."""
    script = Path(__file__).resolve().parents[2] / "bench" / "make_corpus.py"
    cmd = [sys.executable, str(script), "--out", str(out), "--mb", str(mb)]
    subprocess.run(cmd, check=True, capture_output=True)
    return out
