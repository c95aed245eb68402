"""Polling until something holds, failing with what was awaited."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T],
    timeout: float,
    what: str,
    every: float = 0.02,
    watch: Iterable[subprocess.Popen[Any]] = (),
) -> T:
    """The first true value of `predicate()`, polled every `every` seconds. Fails after `timeout`
    seconds, or as soon as a process in `watch` has ended (naming it and its exit code)."""
    deadline = time.monotonic() + timeout
    watched = list(watch)
    while not (value := predicate()):
        for proc in watched:
            if proc.poll() is not None:
                raise AssertionError(
                    f"{_name(proc)} (pid {proc.pid}) ended with exit code {proc.returncode}"
                    f" before {what}"
                )
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)
    return value


def _name(proc: subprocess.Popen[Any]) -> str:
    """`corpus VERB` for the CLI, else the program's name."""
    args = [str(a) for a in proc.args] if isinstance(proc.args, list | tuple) else [str(proc.args)]
    if "corpus_assets.cli" in args[:3] and len(args) > 3:
        return f"corpus {args[3]}"
    return Path(args[0]).name
