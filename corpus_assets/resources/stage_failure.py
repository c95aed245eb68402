"""A failed stage's why, as data: the stage sends it through Pipes, the stage runner reads it.

The child (`corpus run`, `tasks`, `cleanup`, `classifier train` when Dagster launched them) sends
one custom Pipes message when it ends with an error it raised on purpose: its one sentence, the
exit code it exits with and whether an upstream asset is not materialized. The runner reads it
with `get_custom_messages()`; nothing is found by searching the stage's stderr. Imports no
Dagster: the child loads this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus_assets.core.errors import CorpusError, UpstreamMissing
from corpus_assets.core.secrets import mask_text

KIND = "corpus/stage_failure"
"""The `kind` of the custom message, so other custom messages never read as a failure."""


@dataclass(frozen=True)
class StageFailure:
    """Why a stage failed, in its own words."""

    sentence: str
    exit_code: int
    upstream_missing: bool

    def message(self) -> dict[str, Any]:
        """The custom Pipes message (JSON)."""
        return {
            "kind": KIND,
            "error": self.sentence,
            "exit_code": self.exit_code,
            "upstream_missing": self.upstream_missing,
        }


def of_exception(exc: BaseException) -> StageFailure | None:
    """The failure the CLI reports for `exc` (the same sentence and exit code it prints and
    exits with); None for a crash or an interrupt, which have no sentence of their own."""
    if isinstance(exc, OSError) and exc.filename is not None:
        from corpus_assets.core.store.atomic import disk_error

        exc = disk_error(exc, Path(exc.filename))
    if not isinstance(exc, CorpusError):
        return None
    return StageFailure(mask_text(str(exc)), exc.exit_code, isinstance(exc, UpstreamMissing))


def from_messages(messages: Sequence[Any]) -> StageFailure | None:
    """The last stage failure among a session's custom messages, if the stage sent one."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("kind") == KIND:
            return StageFailure(
                sentence=str(message.get("error", "")),
                exit_code=int(message.get("exit_code", 1)),
                upstream_missing=bool(message.get("upstream_missing", False)),
            )
    return None
