"""A local Ray's temporary folder: named after its stage, and the folders of dead stages go."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from corpus_assets.core.stages import ray_tasks


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_folders_of_dead_stages_are_removed_and_live_ones_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ray_tasks, "_short_temp", lambda: str(tmp_path))
    dead = tmp_path / f"corpus-ray-{_dead_pid()}"
    live = tmp_path / f"corpus-ray-{os.getppid()}"
    other = tmp_path / "corpus-ray-abcd1234"
    for folder in (dead, live, other):
        (folder / "session_1" / "logs").mkdir(parents=True)
        (folder / "session_1" / "logs" / "raylet.out").write_text("log")

    made = ray_tasks._local_temp()

    assert made == tmp_path / f"corpus-ray-{os.getpid()}"
    assert made.is_dir() and list(made.iterdir()) == []
    assert made.stat().st_mode & 0o777 == 0o700
    assert not dead.exists()
    assert (live / "session_1" / "logs" / "raylet.out").exists()
    assert (other / "session_1").exists()


def test_a_leftover_under_this_process_id_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ray_tasks, "_short_temp", lambda: str(tmp_path))
    mine = tmp_path / f"corpus-ray-{os.getpid()}"
    (mine / "session_old").mkdir(parents=True)

    assert ray_tasks._local_temp() == mine
    assert list(mine.iterdir()) == []
