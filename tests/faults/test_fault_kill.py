"""SIGKILL anywhere, then build again: the same bytes as an uninterrupted build, no cleanup."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest
from fault_support import materializations, runs_of, start_build, step_events, tree
from support.processes import descendants, stage_pids
from support.waiting import wait_for

from corpus_assets.core.config import load_config
from corpus_assets.jobs import BUILD_JOB, CLEANUP_JOB

REPO = Path(__file__).resolve().parents[2]
STORIES = REPO / "data" / "tinystories" / "TinyStoriesV2-GPT4-train.head10000lines.txt"

# A line of the build's stderr, the root, the build process -> True once it has acted.
Trigger = Callable[[str, Path, subprocess.Popen[str]], bool]


@pytest.fixture
def stories(tmp_path: Path) -> Path:
    """~1,700 stories (1.4 MB) in 7 shards: each stage takes about a second, time to kill it."""
    config = tmp_path / "stories.json"
    config.write_text(
        json.dumps(
            {
                "dataset": "killme",
                "version": "v1",
                "tokenizer": {"id": "bytes"},
                "sources": [
                    {
                        "name": "stories",
                        "kind": "text",
                        "path": str(STORIES),
                        "separator": "<|endoftext|>",
                        "license": "cdla-sharing-1.0",
                    }
                ],
                "shards": {"target_mb": 0.2},
            }
        ),
        encoding="utf-8",
    )
    return config


def _kill_stage(stage: str, on: str = "") -> Trigger:
    """SIGKILL the stage's process group when a build output line contains `on`, or (without
    `on`) as soon as the stage has published a per-shard marker in its staging folder (`[!.]*`:
    not a marker's temporary `.NAME.tmp-PID`, which exists before the marker does)."""

    def fire(line: str, root: Path, _build: subprocess.Popen[str]) -> bool:
        if (on and on not in line) or (not on and line):
            return False
        if not on and not any((root / "work").glob(f"*/{stage}/markers/[!.]*")):
            return False
        pids = stage_pids(root, stage)
        for pid in pids:
            os.killpg(pid, signal.SIGKILL)
        return bool(pids)

    return fire


def _kill_build(on: str = "", marker: str = "") -> Trigger:
    """SIGKILL `corpus build` and every process under it (a machine that dies)."""

    def fire(line: str, root: Path, build: subprocess.Popen[str]) -> bool:
        if (on and on not in line) or (marker and line):
            return False
        if marker and not any(root.glob(marker)):
            return False
        _kill_tree(build.pid)
        return True

    return fire


def _kill_tree(top: int) -> None:
    """SIGKILL `top` and every process under it, none left behind: the tree is first frozen
    (SIGSTOP, until no new process appears: a stopped process starts no other), then killed."""
    stopped: set[int] = set()
    while new := {top, *descendants(top)} - stopped:
        for pid in new:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        stopped |= new
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _build(config: Path, root: Path, triggers: list[Trigger]) -> tuple[int, str]:
    """`corpus build`, firing `triggers` in order on its stderr lines (polled between lines)."""
    build = start_build(config, root)
    assert build.stderr is not None and build.stdout is not None
    pending = list(triggers)
    lines: list[str] = []
    lock = threading.Lock()

    def offer(line: str) -> None:
        with lock:
            if pending and pending[0](line, root, build):
                pending.pop(0)

    def poll() -> None:  # marker triggers fire without an output line
        while build.poll() is None and pending:
            offer("")
            time.sleep(0.005)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    for line in build.stderr:
        lines.append(line)
        offer(line)
    build.wait(timeout=300)
    poller.join(timeout=5)
    assert not pending, f"triggers never fired: {pending}\n{''.join(lines)}"
    return build.returncode, "".join(lines) + build.stdout.read()


def _outputs(root: Path) -> dict[str, str]:
    return tree(root, "corpus", "tokens")


def _no_cleanup(root: Path) -> dg.DagsterInstance:
    instance = dg.DagsterInstance.from_config(str(root / "dagster"))
    assert runs_of(instance, CLEANUP_JOB) == [], "a kill must not trigger a cleanup"
    for run in runs_of(instance, BUILD_JOB):
        dead = run.tags.get("dagster/failure_reason") == "UNEXPECTED_TERMINATION"  # marked dead
        assert run.status != dg.DagsterRunStatus.FAILURE or dead, run.run_id
    return instance


@pytest.mark.timeout(400)
def test_kill_loop_same_result(stories: Path, tmp_path: Path) -> None:
    cfg = load_config(stories)
    reference = tmp_path / "reference"
    code, out = _build(stories, reference, [])
    assert code == 0, out
    expected = _outputs(reference)
    assert any(p.endswith(".bin") for p in expected) and len(expected) > 10
    raw_expected = {k: v for k, v in tree(reference, "raw").items() if "LEDGER" not in k}

    # 1. A stage killed inside itself is retried by its policy; the run still succeeds.
    stage_kills = tmp_path / "stage-kills"
    code, out = _build(
        stories,
        stage_kills,
        [
            _kill_stage("fetch", on="fetch: fetching source"),
            _kill_stage("shard", on="writing shards"),
            _kill_stage("tokenize"),
        ],
    )
    assert code == 0, out
    assert _outputs(stage_kills) == expected
    assert {k: v for k, v in tree(stage_kills, "raw").items() if "LEDGER" not in k} == (
        raw_expected
    )
    with _no_cleanup(stage_kills) as instance:
        [run] = runs_of(instance, BUILD_JOB)
        assert run.status == dg.DagsterRunStatus.SUCCESS
        for step in ("raw", "shards", "tokens"):
            events = step_events(instance, run.run_id, step)
            assert events.count("STEP_UP_FOR_RETRY") == 1, (step, events)

    # 2. The whole build killed during shard, between shard and tokenize, during tokenize.
    crashes = tmp_path / "crashes"
    for trigger in (
        _kill_build(on="shard: deduplicating"),
        _kill_build(marker=f"corpus/killme/v1/{cfg.hash12}/_MANIFEST.json"),
        _kill_build(marker=f"work/{cfg.hash12}/tokenize/markers/[!.]*"),
    ):
        code, out = _build(stories, crashes, [trigger])
        assert code == -signal.SIGKILL, out
        # a SIGKILLed process is gone once the kernel has torn it down (at once, unless it was
        # in the middle of disk I/O): every stage process dies, none lives on
        wait_for(
            lambda: stage_pids(crashes, "shard") == stage_pids(crashes, "tokenize") == [],
            30,
            "the killed build's stage processes to be gone",
        )
    code, out = _build(stories, crashes, [])
    assert code == 0, out
    assert "fetch: source stories already in raw/" in out
    assert "shard: already published" in out
    assert "tokenize: resuming:" in out, out
    assert _outputs(crashes) == expected
    with _no_cleanup(crashes) as instance:
        latest = materializations(instance, "shards", cfg.partition_key)[0].asset_materialization
        assert latest is not None and latest.metadata["cached"].value is True
        done = [r for r in runs_of(instance, BUILD_JOB) if r.status == dg.DagsterRunStatus.SUCCESS]
        assert len(done) == 1
