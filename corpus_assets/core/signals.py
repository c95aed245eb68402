"""Children that leave Ctrl-C to their parent: started with SIGINT blocked, then ignoring it.

A Ctrl-C at the terminal sends SIGINT to the whole process group. A Python child that has not
set anything up answers with a KeyboardInterrupt traceback; the parent is the one that should
answer (stop its children, say one line). A child inherits its parent thread's signal mask, also
through exec, so a child started inside `sigint_blocked()` holds a Ctrl-C pending until it
ignores SIGINT (`ignore_sigint`, which drops the pending one), or for ever if it never unblocks.
multiprocessing's resource tracker is started the same way. The parent still receives SIGINT
after the block: it stays pending for the moment the block lasts.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def sigint_blocked() -> Iterator[None]:
    """Block SIGINT in this thread while the body starts child processes."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def ignore_sigint() -> None:
    """In a child started under `sigint_blocked()`: ignore SIGINT from now on, then unblock it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
