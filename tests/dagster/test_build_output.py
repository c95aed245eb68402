"""What `corpus build` prints: on failure the stage's error line, the run id and the full log.

Real `corpus build` processes on a real instance. The tokenize stage is made to fail for real:
the tokens were built with one tokenizer file, then the file changes (it still loads, so the
config is valid) and the stage refuses to mix them (exit 65).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest
from dagster_support import variant, wrapped
from support.corpus import own_instance_env, run_corpus, start_corpus

from corpus_assets.build import driver

CorpusRunner = Callable[..., subprocess.CompletedProcess[str]]
FAILED = re.compile(r"^\[corpus\] run (\S+) FAILED in [0-9.]+ s: (\w+): (.*)$")
# Another line `corpus build` may add after a failed run (its cleanup); not part of this test.
CLEANUP = "[corpus] cleaned up"


def _build(config: Path, root: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return run_corpus("build", config, *flags, "--root", root, environ=own_instance_env())


def _word_tokenizer(path: Path, words: list[str]) -> None:
    """A small word-level tokenizers tokenizer (unknown words map to [UNK])."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "<eos>": 1, **{w: i + 2 for i, w in enumerate(words)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(path))


@pytest.fixture
def tokenize_fails(corpus: CorpusRunner, example: Path, root: Path) -> Path:
    """A config whose tokens exist, built with a tokenizer file that has changed since."""
    tokenizer = example.with_name("word-tokenizer.json")
    _word_tokenizer(tokenizer, ["the", "a", "and", "once", "upon", "time"])
    config = variant(example, "words", tokenizer={"id": "tiny-words", "path": tokenizer.name})
    for stage in ("fetch", "shard", "tokenize"):
        done = corpus("run", "--stage", stage, "--config", config, "--root", root)
        assert done.returncode == 0, done.stderr
    _word_tokenizer(tokenizer, ["the", "a", "and", "once", "upon", "time", "dragon"])
    return config


def _own_lines(stderr: str) -> list[str]:
    lines = stderr.splitlines()
    assert 1 <= len(lines) <= 3, stderr
    return [line for line in lines if not line.startswith(CLEANUP)]


def _run_status(root: Path, run_id: str) -> dg.DagsterRunStatus:
    with dg.DagsterInstance.from_config(str(root / "dagster")) as instance:
        run = instance.get_run_by_id(run_id)
        assert run is not None, run_id
        return run.status


def test_failed_build_prints_the_stage_error_the_run_and_the_log(
    tokenize_fails: Path, root: Path
) -> None:
    done = _build(tokenize_fails, root)
    assert done.returncode == 65, done.stderr
    assert json.loads(done.stdout)["stages"]["tokenize"] == "failed"
    assert "Traceback" not in done.stderr and "Stack Trace" not in done.stderr
    first, second = _own_lines(done.stderr)
    match = FAILED.match(first)
    assert match, first
    run_id, stage, error = match.groups()
    assert stage == "tokenize"
    assert error.startswith("corpus run: error: ") and "was built with tokenizer" in error
    log = root.resolve() / "logs" / f"{run_id}.log"
    assert second == f"[corpus] full log: {log}"
    assert _run_status(root, run_id) == dg.DagsterRunStatus.FAILURE

    text = log.read_text(encoding="utf-8")
    assert "STEP_FAILURE" in text and "Stack Trace:" in text
    assert "dagster._core.definitions.events.Failure" in text, "Dagster's trace is in the log"
    assert error in text, "the stage's own error line is in the log"
    assert "shard: already published" in text, "the stages' progress is in the log"
    assert [p.name for p in log.parent.iterdir()] == [log.name], "no temp files beside it"


def test_verbose_shows_dagster_own_log(tokenize_fails: Path, root: Path) -> None:
    done = _build(tokenize_fails, root, "--verbose")
    assert done.returncode == 65
    assert "STEP_FAILURE" in done.stderr and "Stack Trace:" in done.stderr
    assert "shard: already published" in done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith(CLEANUP)]
    assert FAILED.match(lines[-2]) and lines[-1].startswith("[corpus] full log: ")


def test_corrupt_ledger_fails_the_build_once_in_two_lines(example: Path, root: Path) -> None:
    """A corrupt ledger line stops fetch with 65: not retried, the line names the file."""
    ledger = root / "raw" / "LEDGER.jsonl"
    ledger.parent.mkdir(parents=True)
    ledger.write_bytes(b'{"source_key": \n')
    done = _build(example, root)
    assert done.returncode == 65, done.stderr
    first, second = _own_lines(done.stderr)
    match = FAILED.match(first)
    assert match, first
    run_id, stage, error = match.groups()
    assert stage == "fetch" and error.startswith(f"corpus run: error: {ledger.resolve()}:1: ")
    log = Path(second.removeprefix("[corpus] full log: ")).read_text(encoding="utf-8")
    assert log.count("raw STEP_START") == 1 and "STEP_UP_FOR_RETRY" not in log, "not retried"
    assert _run_status(root, run_id) == dg.DagsterRunStatus.FAILURE


def test_progress_on_a_terminal(example: Path, root: Path) -> None:
    """With stderr a terminal, the stages' progress streams; Dagster's own log does not."""
    main, side = os.openpty()
    build = start_corpus(
        "build", example, "--root", root, environ=own_instance_env(), stdout=subprocess.PIPE,
        stderr=side,
    )  # fmt: skip
    os.close(side)
    chunks = []
    while True:
        try:
            data = os.read(main, 1 << 16)
        except OSError:  # EIO: the last writer closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    assert build.wait(timeout=300) == 0
    assert build.stdout is not None and json.loads(build.stdout.read())["success"] is True
    shown = b"".join(chunks).decode("utf-8").replace("\r\n", "\n")
    lines = shown.splitlines()
    assert lines[0].startswith("[corpus] building partition "), shown
    assert any(line.startswith("shard done: ") for line in lines), shown
    assert any(line.startswith("tokenize done: ") for line in lines), shown
    assert lines[-1].startswith("[corpus] run ") and " succeeded in " in lines[-1], shown
    assert " - dagster - " not in shown and "STEP_START" not in shown


def test_failed_blocking_check_names_the_check(
    example: Path, root: Path, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    """Not a stage but a blocking check failed: the line names the check and its problem."""
    said: list[str] = []
    result = driver.build(
        example,
        root,
        instance,
        stage_runner=wrapped(tmp_path / "wrapper", "corrupt-shard", "shard"),
        emit=said.append,
    )
    assert result.exit_code == 65
    first, second = [line for line in said if not line.startswith(CLEANUP)]
    match = FAILED.match(first)
    assert match and match.group(1) == result.run_id, first
    assert match.group(2) == "shards_checks" and "shards_manifest_valid" in match.group(3), first
    assert second == f"[corpus] full log: {root.resolve() / 'logs' / result.run_id}.log"
