"""A live calibration's record: its answers kept as report files that `recorded_responses` reads.

`record_dir` holds, per batch and repeat, `batch-B-repeat-R.json` in exactly the format of
`corpus_assets.recipes.arithmetic_calibration` (the four identity fields, `trial_id`, `batch`,
`repeat`, `results` in the batch's candidate order, `score` null: the executor grades), written
once the batch's every candidate is answered. Until then, when a call ends (also when one of
its requests failed), the answers of its tasks answered in full, asked or given back by the
executor's answer journal, are kept in `parts/batch-B/<digest>.json`, the record's journal: a
call asked again (its answers were not checkpointed before a kill, a failed sibling request or
a cancel) is answered from it or from the executor's journal instead of the server, so the
reports hold exactly what the job checkpointed. Every file is written at a temp name, fsynced
and renamed. A journal of another calibration (other model, server digest, harness, verifier
or generation settings) in the folder is refused: one record per calibration.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from corpus_assets.core.store.atomic import atomic_writer, dump_json
from corpus_assets.tasks.calibration import Attempt, CalibrationError
from corpus_assets.tasks.types import JSON

Pair = tuple[str, int]


class Recorder:
    """The record folder of one calibration, identified by `key` (a sha256 of its identity)."""

    def __init__(self, folder: Path, identity: Mapping[str, str], key: str) -> None:
        self.folder = folder
        self.identity = dict(identity)
        self.key = key
        self._batch: int | None = None  # the batch whose journal `known` holds
        self.known: dict[Pair, Attempt] = {}
        self._written: set[int] = set()

    def trial_id(self, batch: int, repeat: int) -> str:
        return f"live-{self.key[:12]}-b{batch}-r{repeat}"

    def report_path(self, batch: int, repeat: int) -> Path:
        return self.folder / f"batch-{batch}-repeat-{repeat}.json"

    def provenance(self, batch: int, repeats: int) -> list[JSON]:
        """What the snapshot's provenance says of the batch's reports."""
        return [
            {"path": str(self.report_path(batch, r)), "trial_id": self.trial_id(batch, r),
             "repeat": r}
            for r in range(repeats)
        ]  # fmt: skip

    def load(self, batch: int) -> dict[Pair, Attempt]:
        """The journal of `batch` (read once per batch); earlier batches are forgotten."""
        if self._batch != batch:
            self.known = {}
            for path in sorted((self.folder / "parts" / f"batch-{batch}").glob("*.json")):
                self._read_part(path, batch)
            self._batch = batch
        return self.known

    def _read_part(self, path: Path, batch: int) -> None:
        try:
            part = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CalibrationError(f"record {path}: cannot read it ({exc})") from None
        if not isinstance(part, dict) or part.get("key") != self.key or part.get("batch") != batch:
            raise CalibrationError(
                f"record {path}: it belongs to another calibration (other model, server digest, "
                "harness, verifier or generation settings); give this one a new record_dir"
            )
        for row in part["results"]:
            attempt = Attempt(row["task_id"], row["repeat"], row["response"], row["failure_reason"])
            self.known[(attempt.task_id, attempt.repeat)] = attempt

    async def keep(self, batch: int, attempts: Sequence[Attempt]) -> None:
        """Journal answers the server just gave (before the call returns them)."""
        if not attempts:
            return
        ids = "\0".join(sorted({a.task_id for a in attempts}))
        name = hashlib.sha256(ids.encode("utf-8")).hexdigest()[:24] + ".json"
        part = {"key": self.key, "batch": batch, "results": [_row(a) for a in attempts]}
        path = self.folder / "parts" / f"batch-{batch}" / name
        await asyncio.to_thread(_write, path, part)
        for attempt in attempts:
            self.known[(attempt.task_id, attempt.repeat)] = attempt

    async def finish(self, batch: int, wanted: Sequence[str], repeats: int) -> None:
        """Write the batch's reports once every (candidate, repeat) is answered."""
        if batch in self._written or len(self.known) < len(wanted) * repeats:
            return
        task_ids = list(wanted)  # a checkpoint view: read here, on the calling thread
        if any((t, r) not in self.known for t in task_ids for r in range(repeats)):
            return
        self._written.add(batch)  # a concurrent call of the batch does not write them too
        try:
            for repeat in range(repeats):
                report = self._report(batch, repeat, task_ids)
                await asyncio.to_thread(_write, self.report_path(batch, repeat), report)
        except BaseException:
            self._written.discard(batch)
            raise

    def _report(self, batch: int, repeat: int, task_ids: Sequence[str]) -> dict[str, Any]:
        results = [_row(self.known[(t, repeat)], with_repeat=False) for t in task_ids]
        return {
            **self.identity,
            "trial_id": self.trial_id(batch, repeat),
            "batch": batch,
            "repeat": repeat,
            "results": results,
        }


def _row(attempt: Attempt, with_repeat: bool = True) -> dict[str, JSON]:
    row: dict[str, JSON] = {
        "task_id": attempt.task_id,
        "response": attempt.response,
        "failure_reason": attempt.failure_reason,
    }
    if with_repeat:
        row["repeat"] = attempt.repeat
    else:
        row["score"] = None  # the executor grades every response itself
    return row


def _write(path: Path, doc: Mapping[str, Any]) -> None:
    with atomic_writer(path) as fh:
        fh.write(dump_json(doc))
