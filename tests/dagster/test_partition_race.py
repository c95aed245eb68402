"""Processes that add the same new config partition at once: each one succeeds and the key is
there once (Dagster's own add reads, then inserts, so all but one insert can fail)."""

from __future__ import annotations

import multiprocessing as mp
import signal
from collections import Counter
from pathlib import Path

import dagster as dg

from corpus_assets.instance.partitions import add_partition

PROCESSES = 6
KEYS = 12


def _add(args: tuple[str, str, bool]) -> str:
    home, key, ours = args
    instance = dg.DagsterInstance.from_config(home)
    try:
        if ours:
            add_partition(instance, "configs", key)
        else:
            instance.add_dynamic_partitions("configs", [key])
    except Exception as exc:
        return type(exc).__name__
    return "ok"


def _race(home: Path, ours: bool, first: int = 0) -> Counter[str]:
    if not home.exists():
        home.mkdir()
        (home / "dagster.yaml").write_text("", encoding="utf-8")
        dg.DagsterInstance.from_config(str(home)).add_dynamic_partitions("configs", ["warm"])
    outcomes: Counter[str] = Counter()
    # spawned, not forked: a fork of the test process copies locks its other threads may hold;
    # SIGTERM at its default in the workers (an ignored one is inherited through exec), or the
    # pool's terminate() never ends
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        pool = mp.get_context("spawn").Pool(PROCESSES)
    finally:
        signal.signal(signal.SIGTERM, previous)
    with pool:
        for k in range(first, first + KEYS):
            work = pool.map_async(_add, [(str(home), f"key-{k}", ours)] * PROCESSES)
            outcomes.update(work.get(timeout=120))
    return outcomes


def test_the_same_partition_added_by_many_processes_at_once_never_fails(tmp_path: Path) -> None:
    bare: Counter[str] = Counter()
    for round_ in range(5):  # the race is real on this instance (a busy machine may need rounds)
        bare += _race(tmp_path / "bare", ours=False, first=round_ * KEYS)
        if bare["IntegrityError"]:
            break
    assert bare["IntegrityError"] > 0, bare
    ours = _race(tmp_path / "ours", ours=True)
    assert ours == Counter({"ok": PROCESSES * KEYS}), ours
    instance = dg.DagsterInstance.from_config(str(tmp_path / "ours"))
    keys = instance.get_dynamic_partitions("configs")
    assert sorted(keys) == sorted(["warm", *(f"key-{k}" for k in range(KEYS))])
