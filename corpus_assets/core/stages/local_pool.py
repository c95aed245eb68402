"""A local process pool that outlives a dead worker: a new pool runs the unfinished tasks again.

A worker process that dies (the OOM killer's SIGKILL, a crash) breaks its `ProcessPoolExecutor`
for good: every unfinished task fails with BrokenProcessPool and the pool stops its other
workers. `run_with_rebuilds` then runs the tasks that have no completion marker yet in a new
pool, as Ray reruns a task whose worker died, within Ray's budget (RETRIES new pools per run);
past it, a TransientError (exit 75) names the last dead worker's pid and how it died.

A task writes its files under temporary names, renames them into place, then writes its marker,
so a task killed mid-write leaves nothing under a final name and its rerun overwrites cleanly.

Workers ignore SIGINT: a Ctrl-C (or a stage runner's stop) reaches the whole process group, and
the stage process, not each worker, answers it: it stops its workers and exits with one line.

A worker started with `die_with_parent` ends when the stage process dies, also of a SIGKILL that
reaches the stage alone (the OOM killer's): it never lives on beside the stage's retry.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, suppress
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from typing import Any, ParamSpec, TypeVar

from corpus_assets.core.errors import TransientError
from corpus_assets.core.signals import ignore_sigint, sigint_blocked
from corpus_assets.core.stages.ray_tasks import RETRIES

DEATH_WAIT_S = 2.0  # for a broken pool to stop its other workers
ORPHAN_POLL_S = 0.5  # how often a worker checks that its parent lives (where prctl is missing)
PR_SET_PDEATHSIG = 1
T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")


class WorkerDied(Exception):
    """A worker of an `open_pool` pool died: `str()` says which and how."""


@contextmanager
def open_pool(
    workers: int,
    ctx: BaseContext,
    initializer: Callable[..., object] | None = None,
    initargs: tuple[Any, ...] = (),
) -> Iterator[ProcessPoolExecutor]:
    """A process pool, shut down on exit; a BrokenProcessPool inside becomes a WorkerDied, a
    KeyboardInterrupt stops the workers (which ignore SIGINT) before it goes on."""
    pool = _Pool(workers, ctx, initializer=_start_worker, initargs=(initializer, initargs))
    try:
        yield pool
    except KeyboardInterrupt:
        _terminate(pool)
        raise
    except BrokenProcessPool:
        raise WorkerDied(_death(pool)) from None  # read before shutdown forgets the workers
    except (OSError, RuntimeError):
        # a submit racing the pool's own teardown of a broken pool fails on its closed pipes
        if not pool._broken:
            raise
        raise WorkerDied(_death(pool)) from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


class _Pool(ProcessPoolExecutor):
    """A ProcessPoolExecutor whose workers start with SIGINT blocked, then ignore it."""

    def submit(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Future[R]:
        with sigint_blocked():  # the pool starts its worker processes inside submit
            return super().submit(fn, *args, **kwargs)


def _start_worker(initializer: Callable[..., object] | None, initargs: tuple[Any, ...]) -> None:
    """In a new worker: ignore SIGINT, take SIGTERM's default, then run the pool's own
    initializer. The stage stops its workers with SIGTERM: one the stage inherited ignored (say
    from a process that ran Dagster in-process) would otherwise keep a hung worker alive."""
    ignore_sigint()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if initializer is not None:
        initializer(*initargs)


def die_with_parent(parent_pid: int) -> None:
    """In a pool worker: be SIGKILLed the instant process `parent_pid` (the stage) dies.

    Linux sends the signal when the thread that started the worker ends, which for a pool is the
    stage's thread that submits; a watch thread is the backstop elsewhere, and for a parent that
    died before the prctl.
    """
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()


def _exit_when_orphaned(parent_pid: int) -> None:
    """End this worker once its parent is no longer `parent_pid`."""
    while os.getppid() == parent_pid:
        time.sleep(ORPHAN_POLL_S)
    os._exit(1)


def _terminate(pool: ProcessPoolExecutor) -> None:
    """SIGTERM every worker of `pool`: a task killed mid-write leaves only temporary files."""
    for process in list((pool._processes or {}).values()):
        with suppress(ValueError, OSError):  # closed, or gone already
            process.terminate()


def run_with_rebuilds(
    tasks: list[T],
    attempt: Callable[[list[T]], Iterable[R]],
    unfinished: Callable[[T], bool],
    worker: str,
    note: Callable[[str], None],
) -> Iterator[R]:
    """What `attempt(tasks)` yields; when a worker of its pool dies, `attempt` again with the
    tasks still `unfinished`, up to RETRIES times. `worker` names one ("shard worker")."""
    pending, deaths = tasks, 0
    while pending:
        try:
            yield from attempt(pending)
            return
        except WorkerDied as death:
            if deaths == RETRIES:
                raise TransientError(
                    f"{worker}s died {deaths + 1} times, the last {death}; run the stage again "
                    "(with fewer --workers if they ran out of memory)"
                ) from None
            deaths += 1
            pending = [t for t in tasks if unfinished(t)]
            note(
                f"a {worker} {death}; running the {len(pending)} unfinished tasks in a new "
                f"pool (retry {deaths} of {RETRIES})"
            )


def _death(pool: ProcessPoolExecutor) -> str:
    """'(pid 1234) was killed by SIGKILL' for the worker that broke `pool`, as far as known.

    The pool SIGTERMs its other workers itself once one died: wait (briefly) until they all
    ended, then name one that ended otherwise.
    """
    processes = dict(pool._processes or {})
    codes = _exitcodes(processes)
    deadline = time.monotonic() + DEATH_WAIT_S
    while None in codes.values() and time.monotonic() < deadline:
        time.sleep(0.01)
        codes = _exitcodes(processes)
    ended = [
        (code == -signal.SIGTERM, pid, code) for pid, code in codes.items() if code is not None
    ]
    if not ended:
        return "(pid unknown) died"
    _terminated, pid, code = min(ended)
    if code >= 0:
        return f"(pid {pid}) exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"(pid {pid}) was killed by {name}"


def _exitcodes(processes: Mapping[int, BaseProcess]) -> dict[int, int | None]:
    """Each process's exit code, None while it runs (or while another thread reaps it)."""
    codes: dict[int, int | None] = {}
    for pid, process in processes.items():
        with suppress(ValueError):  # a closed process object: nothing to say
            codes[pid] = process.exitcode
    return codes
