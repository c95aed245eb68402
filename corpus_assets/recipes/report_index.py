"""Recorded reports on disk: one batch's responses in a temporary SQLite file, not in memory.

A report of N tasks is read a chunk at a time and its `results` decoded one object at a time
(`json.JSONDecoder.raw_decode` on a sliding buffer), each stored as a row; only a chunk of text
and one result are held at once, so the memory of a calibrated job does not grow with its
batches' size. The index lives in a private temporary folder, removed with the calibrator.
"""

from __future__ import annotations

import json
import re
import sqlite3
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from corpus_assets.tasks.calibration import Attempt, CalibrationError

IN_LIMIT = 500
CHUNK = 1 << 20  # characters read at a time
_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class ReportIndex:
    """The current batch's attempts by (task, repeat), in a SQLite file of its own."""

    def __init__(self) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="corpus-reports-")
        self.db = sqlite3.connect(Path(self._folder.name) / "reports.sqlite3", isolation_level=None)
        self.db.executescript(
            """
            PRAGMA journal_mode=OFF;
            PRAGMA synchronous=OFF;
            CREATE TABLE wanted (seq INTEGER PRIMARY KEY, task_id TEXT NOT NULL UNIQUE);
            CREATE TABLE attempts (
                task_id TEXT NOT NULL, repeat INTEGER NOT NULL, response TEXT NOT NULL,
                failure_reason TEXT, PRIMARY KEY (task_id, repeat)
            );
            """
        )

    def reset(self, wanted: Sequence[str]) -> None:
        """Forget the previous batch; `wanted` are the ids every report must cover."""
        self.db.execute("BEGIN")
        self.db.execute("DELETE FROM attempts")
        self.db.execute("DELETE FROM wanted")
        self.db.executemany("INSERT INTO wanted (task_id) VALUES (?)", ((t,) for t in wanted))
        self.db.execute("COMMIT")

    def load(self, source: TextIO, path: Path, repeat: int) -> dict[str, Any]:
        """Store one report's results as `repeat`; its other top-level fields."""
        self.db.execute("BEGIN")
        try:
            fields = scan_report(source, path, lambda i, r: self._add(path, repeat, i, r))
            self._covers(path, repeat)
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")
        return fields

    def _add(self, path: Path, repeat: int, index: int, result: object) -> None:
        if not isinstance(result, dict) or not isinstance(result.get("task_id"), str):
            raise CalibrationError(f"report {path}: results[{index}] needs a string 'task_id'")
        reason = result.get("failure_reason")
        if reason is not None and not isinstance(reason, str):
            raise CalibrationError(
                f"report {path}: results[{index}] field 'failure_reason' must be a string or null"
            )
        try:
            self.db.execute(
                "INSERT INTO attempts VALUES (?, ?, ?, ?)",
                (result["task_id"], repeat, json.dumps(result.get("response")), reason),
            )
        except sqlite3.IntegrityError:
            raise CalibrationError(
                f"report {path}: task {result['task_id']!r} appears twice in results"
            ) from None

    def _covers(self, path: Path, repeat: int) -> None:
        """The report's tasks are exactly the wanted ones (the first missing one named)."""
        missing = self.db.execute(
            "SELECT task_id, (SELECT COUNT(*) FROM wanted w2 WHERE NOT EXISTS (SELECT 1 FROM "
            "attempts b WHERE b.task_id = w2.task_id AND b.repeat = ?)) FROM wanted w "
            "WHERE NOT EXISTS (SELECT 1 FROM attempts a WHERE a.task_id = w.task_id "
            "AND a.repeat = ?) ORDER BY seq LIMIT 1",
            (repeat, repeat),
        ).fetchone()
        if missing is not None:
            raise CalibrationError(
                f"report {path}: field 'results' does not cover task {missing[0]!r} "
                f"({missing[1]} of the batch's candidate task(s) missing)"
            )
        extra = self.db.execute(
            "SELECT task_id FROM attempts a WHERE repeat = ? AND NOT EXISTS "
            "(SELECT 1 FROM wanted w WHERE w.task_id = a.task_id) ORDER BY task_id LIMIT 1",
            (repeat,),
        ).fetchone()
        if extra is not None:
            raise CalibrationError(
                f"report {path}: field 'results' has task {extra[0]!r}, which is not a candidate "
                "of this batch (work/batch-N-candidates.jsonl)"
            )

    def attempts(self, task_ids: Sequence[str], repeats: int) -> list[Attempt]:
        """The attempts of `task_ids`, task by task, repeat by repeat (KeyError names a gap)."""
        found: dict[tuple[str, int], Attempt] = {}
        distinct = sorted(set(task_ids))
        for start in range(0, len(distinct), IN_LIMIT):
            part = distinct[start : start + IN_LIMIT]
            marks = ",".join("?" * len(part))
            for task_id, repeat, response, reason in self.db.execute(
                f"SELECT task_id, repeat, response, failure_reason FROM attempts "
                f"WHERE task_id IN ({marks})",
                part,
            ):
                found[(task_id, repeat)] = Attempt(task_id, repeat, json.loads(response), reason)
        return [found[(t, r)] for t in task_ids for r in range(repeats)]

    def close(self) -> None:
        self.db.close()
        self._folder.cleanup()


def scan_report(
    source: TextIO, path: Path, on_result: Callable[[int, object], None], chunk: int = CHUNK
) -> dict[str, Any]:
    """The report's top-level fields, read from `source` a chunk at a time; each element of
    `results` goes to `on_result` instead (then `fields["results"]` is an empty list).
    CalibrationError when it is not JSON or not an object."""
    try:
        return _scan(_Reader(source, chunk), on_result)
    except (ValueError, IndexError) as exc:
        raise CalibrationError(f"report {path}: not JSON ({exc})") from None
    except UnicodeDecodeError as exc:
        raise CalibrationError(f"report {path}: not UTF-8 ({exc.reason})") from None
    except _NotObject:
        raise CalibrationError(f"report {path}: must be a JSON object") from None


class _NotObject(Exception):
    pass


class _Reader:
    """JSON values decoded from a text stream through a sliding buffer of a few chunks."""

    def __init__(self, source: TextIO, chunk: int = CHUNK) -> None:
        self.source, self.chunk = source, chunk
        self.buf, self.pos, self.eof = "", 0, False

    def _more(self) -> bool:
        if self.eof:
            return False
        data = self.source.read(self.chunk)
        if not data:
            self.eof = True
            return False
        self.buf, self.pos = self.buf[self.pos :] + data, 0  # what was read is dropped
        return True

    def peek(self) -> str:
        """The next character that is not white space ('' at the end)."""
        while True:
            match = _SPACE.match(self.buf, self.pos)
            self.pos = match.end() if match else self.pos
            if self.pos < len(self.buf) or not self._more():
                return self.buf[self.pos : self.pos + 1]

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise ValueError(f"expected {char!r}")
        self.pos += 1

    def value(self) -> Any:
        """The next JSON value (read on while it may be cut at the buffer's end)."""
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except ValueError:
                if self._more():
                    continue
                raise
            if end == len(self.buf) and self._more():
                continue  # a number or literal may go on in the next chunk
            self.pos = end
            return value


def _scan(reader: _Reader, on_result: Callable[[int, object], None]) -> dict[str, Any]:
    if reader.peek() != "{":
        reader.value()  # not JSON at all raises ValueError here
        if reader.peek():
            raise ValueError("extra data after the value")
        raise _NotObject
    reader.expect("{")
    fields: dict[str, Any] = {}
    if reader.peek() != "}":
        while True:
            key = reader.value()
            if not isinstance(key, str):
                raise ValueError("an object key is not a string")
            reader.expect(":")
            if key == "results" and reader.peek() == "[":
                _array(reader, on_result)
                fields[key] = []
            else:
                fields[key] = reader.value()
            if reader.peek() == "}":
                break
            reader.expect(",")
    reader.expect("}")
    if reader.peek():
        raise ValueError("extra data after the report object")
    return fields


def _array(reader: _Reader, on_item: Callable[[int, object], None]) -> None:
    """Decode the array at the reader element by element."""
    reader.expect("[")
    if reader.peek() == "]":
        reader.expect("]")
        return
    index = 0
    while True:
        on_item(index, reader.value())
        index += 1
        if reader.peek() == "]":
            reader.expect("]")
            return
        reader.expect(",")
