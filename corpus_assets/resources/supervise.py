"""Run one child process under watch: tee its output, notice silence, stop it on request.

Plain process handling with no Dagster in it, so the stage runner stays short and this part can
be tested on its own. The child gets its own process group, so stopping it also stops the worker
processes it started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

TAIL_LINES = 40


@dataclass(frozen=True)
class Outcome:
    """How a child ended: its exit code, whether we stopped it for silence, its output."""

    returncode: int
    silent_for: float | None
    stdout: str
    stderr_tail: tuple[str, ...]
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.silent_for is not None


class _Pump(threading.Thread):
    """Reads one pipe line by line; every line counts as a sign of life."""

    def __init__(self, pipe: IO[bytes], on_line: Callable[[str], None] | None) -> None:
        super().__init__(daemon=True)
        self.pipe = pipe
        self.on_line = on_line
        self.lines: list[str] = []
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.last_seen = time.monotonic()

    def run(self) -> None:
        for raw in iter(self.pipe.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            self.last_seen = time.monotonic()
            self.tail.append(line)
            if self.on_line is None:
                self.lines.append(line)
            else:
                self.on_line(line)
        self.pipe.close()


def tee_stderr(line: str) -> None:
    """Pass a child's stderr line through to ours (the terminal, or Dagster's compute log)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def supervise(
    argv: Sequence[str],
    env: Mapping[str, str],
    heartbeat_timeout_s: float,
    termination_timeout_s: float,
    on_stderr: Callable[[str], None] = tee_stderr,
    poll_s: float = 0.2,
) -> Outcome:
    """Run `argv` to the end; stop it when silent longer than `heartbeat_timeout_s`.

    Any exception while waiting (a Dagster interrupt when the run is cancelled, Ctrl-C) stops the
    child first and is then re-raised.
    """
    start = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    out, err = _Pump(proc.stdout, None), _Pump(proc.stderr, on_stderr)
    out.start()
    err.start()
    silent_for: float | None = None
    try:
        while True:
            try:
                proc.wait(timeout=poll_s)
                break
            except subprocess.TimeoutExpired:
                quiet = time.monotonic() - max(out.last_seen, err.last_seen)
                if quiet > heartbeat_timeout_s:
                    silent_for = quiet
                    on_stderr(f"[corpus] no output for {quiet:.0f} s; stopping pid {proc.pid}")
                    stop(proc, termination_timeout_s)
                    break
    except BaseException:
        stop(proc, termination_timeout_s)
        raise
    finally:
        out.join(timeout=5)
        err.join(timeout=5)
    return Outcome(
        returncode=proc.returncode,
        silent_for=silent_for,
        stdout="\n".join(out.lines),
        stderr_tail=tuple(err.tail),
        seconds=time.monotonic() - start,
    )


def stop(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGINT to the child's process group; after `grace_s` seconds SIGKILL whatever is left."""
    _signal_group(proc.pid, signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
