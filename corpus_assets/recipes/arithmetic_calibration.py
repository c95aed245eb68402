"""Recorded responses: calibrate against an evaluation that was run elsewhere.

`recorded_responses(...)` is a calibration factory. Its params name the model and harness
(`model_ref`, `harness_ref`, `backend_model_digest`, `verifier_digest`) and `reports`: per batch,
one report file per repeat. A report file is JSON with those four fields, a `trial_id`, its
`batch` and `repeat`, and `results` (`task_id`, `response`, `failure_reason`, and a stored
`score` that is ignored: the executor grades every response again). A report must cover exactly
the batch's retained candidates (`context.batch_task_ids`, the ids of
`work/batch-N-candidates.jsonl`), of which one call asks about a part; the repeats of a batch
have distinct trial ids. Anything else is a CalibrationError (exit 65) naming the file and the
field. A batch's reports are read and checked once and kept until the next batch is asked about.
Report paths resolve against `config_dir` (the job config's folder, which the executor passes).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corpus_assets.core.store.digests import file_sha256
from corpus_assets.recipes.report_index import ReportIndex
from corpus_assets.tasks.calibration import (
    CalibrationBatch,
    CalibrationContext,
    CalibrationError,
)
from corpus_assets.tasks.types import JSON, PublicTask

IDENTITY = ("model_ref", "harness_ref", "backend_model_digest", "verifier_digest")


def recorded_responses(
    *,
    model_ref: str,
    harness_ref: str,
    backend_model_digest: str,
    verifier_digest: str,
    reports: Sequence[Sequence[str]],
    config_dir: str = ".",
) -> RecordedResponses:
    """The factory `calibration.implementation` names; `reports[batch][repeat]` are files."""
    identity = dict(
        zip(IDENTITY, (model_ref, harness_ref, backend_model_digest, verifier_digest), strict=True)
    )
    bad = [k for k, v in identity.items() if not isinstance(v, str) or not v]
    if bad:
        raise CalibrationError(f"recorded_responses: {', '.join(bad)} must be non-empty strings")
    if not isinstance(reports, list) or not all(
        isinstance(b, list) and all(isinstance(f, str) for f in b) for b in reports
    ):
        raise CalibrationError(
            "recorded_responses: reports must be a list (per batch) of lists (per repeat) of paths"
        )
    base = Path(config_dir)
    files = [[(base / f).resolve() for f in batch] for batch in reports]
    return RecordedResponses(identity, files)


class RecordedResponses:
    """An async calibrator that answers from report files instead of a model."""

    def __init__(self, identity: dict[str, str], reports: list[list[Path]]) -> None:
        self.identity = identity
        self.reports = reports
        self._index = ReportIndex()
        self._batch: int | None = None  # the batch whose reports the index holds
        self._provenance: dict[str, JSON] = {}

    def source_files(self) -> list[Path]:
        """The report files: part of the job's resume identity (a changed report is refused)."""
        return [path for batch in self.reports for path in batch]

    async def __call__(
        self, tasks: Sequence[PublicTask], context: CalibrationContext
    ) -> CalibrationBatch:
        if self._batch != context.batch_index:
            self._batch = None
            wanted = context.batch_task_ids or [t.task_id for t in tasks]
            self._provenance = self._load(wanted, context)
            self._batch = context.batch_index
        try:
            attempts = self._index.attempts([t.task_id for t in tasks], context.repeats)
        except KeyError as exc:
            raise CalibrationError(
                f"recorded_responses: task {exc.args[0][0]!r} was asked about but is not a "
                f"candidate of batch {context.batch_index}"
            ) from None
        return CalibrationBatch(tuple(attempts), self._provenance)

    def _load(self, wanted: Sequence[str], context: CalibrationContext) -> dict[str, JSON]:
        """Index the batch's reports, checked; their provenance."""
        if context.batch_index >= len(self.reports):
            raise CalibrationError(
                f"recorded_responses: no reports for batch {context.batch_index} "
                f"(params.reports has {len(self.reports)} batch(es))"
            )
        files = self.reports[context.batch_index]
        if len(files) != context.repeats:
            raise CalibrationError(
                f"recorded_responses: batch {context.batch_index} has {len(files)} report(s); "
                f"calibration.repeats is {context.repeats}"
            )
        self._index.reset(wanted)
        provenance: list[dict[str, JSON]] = []
        trials: dict[str, Path] = {}
        for repeat, path in enumerate(files):
            report, digest = self._read(path, repeat)
            self._check(report, path, context.batch_index, repeat)
            trial = report["trial_id"]
            if trial in trials:
                raise CalibrationError(
                    f"report {path}: trial_id {trial!r} repeats that of {trials[trial]}; the "
                    "repeats of a batch need distinct trial ids"
                )
            trials[trial] = path
            provenance.append(
                {"path": str(path), "sha256": digest, "trial_id": trial, "repeat": repeat}
            )
        return {**self.identity, "kind": "recorded_responses", "reports": provenance}

    def _read(self, path: Path, repeat: int) -> tuple[dict[str, Any], str]:
        """Index one report as `repeat`: its top-level fields and the sha256 of its bytes."""
        try:
            with path.open(encoding="utf-8") as source:
                fields = self._index.load(source, path, repeat)
            return fields, file_sha256(path)
        except OSError as exc:
            raise CalibrationError(f"report {path}: cannot read it ({exc.strerror})") from None

    def _check(self, report: dict[str, Any], path: Path, batch: int, repeat: int) -> None:
        for key, want in (*self.identity.items(), ("batch", batch), ("repeat", repeat)):
            if report.get(key) != want:
                raise CalibrationError(
                    f"report {path}: field {key!r} is {report.get(key)!r}, expected {want!r}"
                )
        if not isinstance(report.get("trial_id"), str) or not report["trial_id"]:
            raise CalibrationError(f"report {path}: field 'trial_id' must be a non-empty string")
        if not isinstance(report.get("results"), list):
            raise CalibrationError(f"report {path}: field 'results' must be a list")
