"""Recorded reports on disk: one batch's responses in a temporary SQLite file, not in memory.

A report of N tasks is read as text and its `results` decoded one object at a time
(`json.JSONDecoder.raw_decode`), each stored as a row; only the text of one report and one
result are held at once, so the memory of a calibrated job does not grow with its batches'
size. The index lives in a private temporary folder, removed with the calibrator.
"""

from __future__ import annotations

import json
import re
import sqlite3
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from corpus_assets.tasks.calibration import Attempt, CalibrationError

IN_LIMIT = 500
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

    def load(self, text: str, path: Path, repeat: int) -> dict[str, Any]:
        """Store one report's results as `repeat`; its other top-level fields."""
        self.db.execute("BEGIN")
        try:
            fields = scan_report(text, path, lambda i, r: self._add(path, repeat, i, r))
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


def scan_report(text: str, path: Path, on_result: Callable[[int, object], None]) -> dict[str, Any]:
    """The report's top-level fields; each element of `results` goes to `on_result` instead
    (then `fields["results"]` is an empty list). CalibrationError when it is not JSON."""
    try:
        return _scan(text, on_result)
    except (ValueError, IndexError) as exc:
        raise CalibrationError(f"report {path}: not JSON ({exc})") from None
    except _NotObject:
        raise CalibrationError(f"report {path}: must be a JSON object") from None


class _NotObject(Exception):
    pass


def _scan(text: str, on_result: Callable[[int, object], None]) -> dict[str, Any]:
    pos = _skip(text, 0)
    if text[pos : pos + 1] != "{":
        _DECODER.decode(text)  # not JSON at all raises ValueError here
        raise _NotObject
    fields: dict[str, Any] = {}
    pos = _skip(text, pos + 1)
    if text[pos] == "}":
        return _end(text, pos, fields)
    while True:
        key, pos = _DECODER.raw_decode(text, pos)
        if not isinstance(key, str):
            raise ValueError(f"an object key at char {pos} is not a string")
        pos = _expect(text, _skip(text, pos), ":")
        pos = _skip(text, pos)
        if key == "results" and text[pos] == "[":
            pos = _array(text, pos, on_result)
            fields[key] = []
        else:
            fields[key], pos = _DECODER.raw_decode(text, pos)
        pos = _skip(text, pos)
        if text[pos] == "}":
            return _end(text, pos, fields)
        pos = _skip(text, _expect(text, pos, ","))


def _array(text: str, pos: int, on_item: Callable[[int, object], None]) -> int:
    """Decode the array at `pos` element by element; the position after it."""
    pos = _skip(text, pos + 1)
    index = 0
    if text[pos] == "]":
        return pos + 1
    while True:
        item, pos = _DECODER.raw_decode(text, pos)
        on_item(index, item)
        index += 1
        pos = _skip(text, pos)
        if text[pos] == "]":
            return pos + 1
        pos = _skip(text, _expect(text, pos, ","))


def _skip(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def _expect(text: str, pos: int, char: str) -> int:
    if text[pos] != char:
        raise ValueError(f"expected {char!r} at char {pos}")
    return pos + 1


def _end(text: str, pos: int, fields: dict[str, Any]) -> dict[str, Any]:
    if _skip(text, pos + 1) != len(text):
        raise ValueError(f"extra data at char {pos + 1}")
    return fields
