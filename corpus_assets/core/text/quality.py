"""Quality classifiers: fastText supervised models, the text they read, and their scores.

One function, `classifier_text`, turns a document into the line a classifier reads, for
training and for scoring alike:

- every newline becomes a space: fastText reads one line at a time (its `predict` refuses a
  newline; in a training file a newline ends the example). It splits words on runs of space,
  tab, newline, carriage return, vertical tab, form feed and NUL (SEPARATORS) and on nothing
  else, so the words it reads are the text's words, whatever the spacing, and the line is the
  one datatrove's `FastTextClassifierFilter` (`newline_replacement=" "`) and DCLM's scorer
  (`text.replace("\\n", " ")`) give it: the scores are theirs;
- with `lowercase`, the text is lowercased (`str.lower`): for models trained on lowercased
  text. A classifier trained here records the setting in its manifest and the shard stage
  applies it; a model trained elsewhere (DCLM's, say: not lowercased) says it in the corpus
  config.

A document's score is the probability the model gives its `label` (`predict` with every label,
`k=-1`), clamped to 1.0 (fastText adds 1e-5 to each probability before taking its logarithm).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from corpus_assets.core.errors import ConfigError

LABEL_PREFIX = "__label__"
SEPARATORS = " \t\n\r\v\f\x00"
"""The characters fastText splits words on (`Dictionary::readWord`); a run of them is one break."""


def classifier_text(text: str, lowercase: bool = False) -> str:
    """The one line a classifier reads for `text` (see the module docstring): its newlines as
    spaces, lowercased with `lowercase`. The other separators and runs of them stay: fastText
    splits words on them all the same, so the words it reads are those of the text."""
    line = text.replace("\n", " ")
    return line.lower() if lowercase else line


@cache
def load_model(path: str) -> Any:
    """The fastText model at `path`, loaded once per process (a `.bin` or a quantized `.ftz`,
    written by this package or by the original fastText)."""
    import fasttext  # type: ignore[import-untyped]

    try:
        return fasttext.load_model(path)
    except ValueError as exc:  # fastText's own words: "... has wrong file format!"
        raise ConfigError(f"{path}: not a fastText model ({exc})") from None


def model_labels(model: Any) -> list[str]:
    """The model's labels without fastText's `__label__` prefix, in the model's order."""
    return [label.removeprefix(LABEL_PREFIX) for label in model.get_labels()]


class Scorer:
    """Called on document texts: the probability the model at `path` gives `label`, each."""

    def __init__(self, path: Path, label: str, lowercase: bool = False, name: str = "") -> None:
        self.model = load_model(str(path))
        labels = model_labels(self.model)
        if label.removeprefix(LABEL_PREFIX) not in labels:
            who = f"classifier {name!r}: " if name else ""
            raise ConfigError(
                f"{who}label {label!r} is not one of the model's labels; "
                f"allowed: {', '.join(labels)}"
            )
        self.label = LABEL_PREFIX + label.removeprefix(LABEL_PREFIX)
        self.lowercase = lowercase

    def __call__(self, text: str) -> float:
        return self.many([text])[0]

    def many(self, texts: Sequence[str]) -> list[float]:
        """The score of each text, in order (one call into fastText for all of them)."""
        if not texts:
            return []
        lines = [classifier_text(t, self.lowercase) for t in texts]
        labels, probs = self.model.predict(lines, k=-1, threshold=0.0)
        return [_score(ls, ps, self.label) for ls, ps in zip(labels, probs, strict=True)]


def _score(labels: Sequence[str], probs: Sequence[float], label: str) -> float:
    for name, prob in zip(labels, probs, strict=True):
        if name == label:
            return min(float(prob), 1.0)
    return 0.0
