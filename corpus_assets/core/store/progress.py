"""Progress lines at a steady pace: documents, MB and rate. They double as a heartbeat."""

from __future__ import annotations

import time
from collections.abc import Callable

Emit = Callable[[str], None]


def silent(_: str) -> None:
    """An emitter that drops every line (library use, tests)."""


class Progress:
    """Counts documents and bytes; emits a line at most every `every` seconds."""

    def __init__(self, stage: str, emit: Emit, every: float = 5.0) -> None:
        self.stage = stage
        self.emit = emit
        self.every = every
        self.docs = 0
        self.bytes = 0
        self.start = time.monotonic()
        self._last = self.start

    def add(self, docs: int, nbytes: int) -> None:
        self.docs += docs
        self.bytes += nbytes
        now = time.monotonic()
        if now - self._last >= self.every:
            self._last = now
            self.emit(self.line())

    def beat(self, message: str) -> None:
        """Emit `message` if nothing was emitted for `every` seconds (long phases stay heard)."""
        now = time.monotonic()
        if now - self._last >= self.every:
            self._last = now
            self.emit(f"{self.stage}: {message}")

    def note(self, message: str) -> None:
        self._last = time.monotonic()
        self.emit(f"{self.stage}: {message}")

    def line(self, final: bool = False) -> str:
        elapsed = max(time.monotonic() - self.start, 1e-9)
        mb = self.bytes / 1e6
        word = "done" if final else "progress"
        return (
            f"{self.stage} {word}: {self.docs:,} documents, {mb:,.1f} MB, "
            f"{self.docs / elapsed:,.0f} docs/s, {mb / elapsed:,.2f} MB/s"
        )

    def done(self, extra: str = "") -> None:
        """The final line, with `extra` appended (e.g. what was found already done)."""
        self.emit(self.line(final=True) + extra)
