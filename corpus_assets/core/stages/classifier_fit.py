"""fastText's supervised training, each in a process of its own.

fastText keeps state between trainings in one process: a second `train_supervised` with the
same file, settings and seed gives other model bytes, or fails with "Encountered NaN" (seen
with fasttext-numpy2-wheel 0.9.2). A new interpreter (`python -m` this module: nothing is
inherited) gives the same bytes every time. The stage waits for it with a line every few
seconds, so a long training is not taken for a hung stage; the process dies with the stage.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

from corpus_assets.core.errors import ConfigError, CorpusError

FAILED = 2  # the training process's exit code when fastText raised


def fit(
    settings: dict[str, Any],
    train_file: str,
    model_path: str,
    note: Callable[[str], None],
    every: float = 5.0,
) -> None:
    """Train fastText on `train_file` with `settings` (train_supervised's keywords) in a new
    process and save the model at `model_path`, fsynced; `note` hears every `every` seconds."""
    argv = [sys.executable, "-m", __name__, json.dumps(settings), train_file, model_path]
    argv.append(str(os.getpid()))
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    waited = 0.0
    try:
        while True:
            try:
                _, err = process.communicate(timeout=every)
                break
            except subprocess.TimeoutExpired:
                waited += every
                note(f"training: {waited:,.0f} s")
    except BaseException:  # interrupted: the training stops with the stage
        process.kill()
        process.wait()
        raise
    if process.returncode == 0:
        return
    line = (err.strip().splitlines() or ["no message"])[-1]
    if process.returncode == FAILED and "NaN" in line:
        raise ConfigError(
            f"fastText training diverged ({line}); lower [training] lr (now {settings['lr']}) "
            "or epoch"
        )
    raise CorpusError(f"the fastText training process failed (exit {process.returncode}): {line}")


def fit_here(settings: dict[str, Any], train_file: str, model_path: str) -> None:
    """In the training process: train, save, fsync."""
    import fasttext  # type: ignore[import-untyped]

    model = fasttext.train_supervised(input=train_file, **settings)
    model.save_model(model_path)
    with open(model_path, "rb+") as fh:
        os.fsync(fh.fileno())


def main(argv: Sequence[str]) -> int:
    """`python -m corpus_assets.core.stages.classifier_fit SETTINGS TRAIN MODEL PARENT_PID`."""
    from corpus_assets.core.stages.local_pool import die_with_parent

    settings, train_file, model_path, parent = argv
    die_with_parent(int(parent))
    try:
        fit_here(json.loads(settings), train_file, model_path)
    except (RuntimeError, ValueError) as exc:  # fastText's own words, one line
        sys.stderr.write(f"{exc}\n")
        return FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
