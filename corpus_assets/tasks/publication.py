"""Publishing a job: its report (counts per batch and in total, what selection said) and its
provenance (config, code digests, declared sources, calibration), written with the projected
rows as the snapshot, after the declared sources are hashed again."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from corpus_assets.core.errors import DataError
from corpus_assets.tasks import corpus_inputs
from corpus_assets.tasks.calibrate import CalibrateStep
from corpus_assets.tasks.checkpoints import BatchState, Checkpoints, canonical
from corpus_assets.tasks.config import LoadedJobConfig, identity_form
from corpus_assets.tasks.identity import factory_files, job_identity
from corpus_assets.tasks.jobdir import JobFolder
from corpus_assets.tasks.snapshot import write_snapshot
from corpus_assets.tasks.types import Recipe
from corpus_assets.tasks.workers import RecipeSpec

SOURCE_KEYS = (  # the identity's file digests hashed again before publication
    ("inputs", "input"),
    ("exclusions", "exclusion"),
    ("recipe_files", "recipe source"),
    ("calibration_files", "calibration"),
)


def batch_totals(ckpt: Checkpoints) -> dict[str, int]:
    """Generated, rejected, duplicates, excluded and retained over every batch."""
    totals = dict.fromkeys(("generated", "rejected", "duplicates", "excluded", "retained"), 0)
    for state in ckpt.batches():
        for key, value in state.counts().items():
            if key != "batch":
                totals[key] += value
    return totals


@dataclass(frozen=True)
class Publication:
    """What the snapshot of a selected and projected job is made of."""

    config: LoadedJobConfig
    spec: RecipeSpec
    recipe: Recipe
    calibrate: CalibrateStep | None
    identity: dict[str, Any]
    corpus_inputs: tuple[corpus_inputs.CorpusInput, ...]
    ckpt: Checkpoints
    folder: JobFolder

    def _check_sources_unchanged(self) -> None:
        """Hash the declared inputs, exclusions and source files again: one that changed while
        the job ran fails it (DataError), so no manifest names bytes the job did not read."""
        calibrator = None if self.calibrate is None else self.calibrate.calibrator
        try:
            now = job_identity(self.config, self.spec, self.recipe, calibrator)
        except OSError as exc:
            raise DataError(
                f"a declared file can no longer be read before publication: {exc}; "
                "nothing was published"
            ) from None
        for key, what in SOURCE_KEYS:
            before, after = self.identity.get(key) or {}, now.get(key) or {}
            for name in sorted(set(before) | set(after)):
                if before.get(name) != after.get(name):
                    raise DataError(
                        f"{what} file {name!r} changed while the job ran: sha256 "
                        f"{before.get(name)} when it started, {after.get(name)} before "
                        "publication; nothing was published (restore the file and resume, "
                        "or start a new job)"
                    )

    def write(self) -> None:
        """Check the declared sources, then write the snapshot in staging and rename it in."""
        self._check_sources_unchanged()
        write_snapshot(
            self.folder.staging,
            self.folder.dataset,
            self.ckpt.projection_rows(),
            self.ckpt.probe_rows(),
            self.report(),
            self.provenance(),
        )

    def report(self) -> dict[str, Any]:
        """Counts per batch and in total, and what selection said (report.json)."""
        selection = self.ckpt.get("selection")
        return {
            "target_count": self.config.model.target_count,
            "purpose": self.config.model.purpose,
            "calibrated": self.calibrate is not None,
            "batches": [self._batch_counts(b) for b in self.ckpt.batches()],
            "totals": batch_totals(self.ckpt),
            "exclusion_ids": self.ckpt.excluded_count(),
            "selection": {
                "selected": len(selection["task_ids"]),
                "after_batch": selection["batch"],
                "statistics": selection["statistics"],
            },
        }

    def _batch_counts(self, state: BatchState) -> dict[str, int]:
        counts = state.counts()
        if self.calibrate is not None:
            counts |= self.ckpt.calibration_counts(state.batch)
        return counts

    def provenance(self) -> dict[str, Any]:
        """The manifest's provenance: config, code digests, declared sources, calibration."""
        return {
            "job": {
                "name": self.config.name,
                "partition_key": self.config.partition_key,
                "config_sha256": self.config.sha256,
            },
            "config": identity_form(self.config.raw),
            "code": {
                "recipe": {"factory": self.spec.factory, "files": self.identity["recipe_files"]},
                "calibrator": None if self.calibrate is None else self._calibrator_code(),
                "executor": self.identity["executor"],
            },
            "sources": {
                "inputs": self.identity["inputs"],
                "corpus_inputs": [c.provenance() for c in self.corpus_inputs],
                "exclusions": self.identity["exclusions"],
            },
            "calibration": self._calibration_provenance(),
        }

    def _calibrator_code(self) -> dict[str, Any]:
        spec = self.config.model.calibration
        assert spec is not None
        return {"factory": spec.implementation, "files": factory_files(spec.implementation)}

    def _calibration_provenance(self) -> dict[str, Any] | None:
        """The calibration settings and, per batch, the distinct provenances of its calls."""
        spec = self.config.model.calibration
        if spec is None:
            return None
        return {
            "implementation": spec.implementation,
            "repeats": spec.repeats,
            "params": json.loads(canonical(spec.params)),
            "batches": [
                {"batch": b.batch, "provenance": self.ckpt.batch_provenance(b.batch)}
                for b in self.ckpt.batches()
            ],
        }
