"""Unscrubbed data stays private: after `corpus build`, whatever the umask, everything under
raw/, work/, logs/ and the Dagster instance is owner-only (folders 0700, files 0600), while the
published shards and tokens (scrubbed) are as the umask makes them."""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.corpus import own_instance_env, run_corpus

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PRIVATE = ("raw", "work", "logs", "dagster")
PUBLISHED = ("corpus", "tokens")


def _tree(top: Path) -> Iterator[Path]:
    yield top
    yield from sorted(top.rglob("*"))


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _build(tmp_path: Path, root: Path, umask: int) -> dict[str, object]:
    """`corpus build` of the bundled example under `umask` (the child inherits it)."""
    if not (tmp_path / "tiny.toml").exists():
        shutil.copytree(EXAMPLES / "tiny", tmp_path / "tiny")
        shutil.copy(EXAMPLES / "tiny.toml", tmp_path / "tiny.toml")
    old = os.umask(umask)
    try:
        done = run_corpus(
            "build", tmp_path / "tiny.toml", "--root", root, environ=own_instance_env()
        )
    finally:
        os.umask(old)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def _not_private(root: Path) -> list[str]:
    """Every path under the private folders that is not exactly 0700 (folder) or 0600 (file)."""
    wrong = []
    for name in PRIVATE:
        if name == "work" and not (root / name).exists():
            continue
        for path in _tree(root / name):
            want = 0o700 if path.is_dir() else 0o600
            if _mode(path) != want:
                wrong.append(f"{path.relative_to(root)} {oct(_mode(path))}")
    return wrong


@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask-022", "umask-000"])
def test_unscrubbed_data_is_owner_only_and_published_data_follows_the_umask(
    tmp_path: Path, umask: int
) -> None:
    root = tmp_path / "data"
    summary = _build(tmp_path, root, umask)
    assert summary["success"] is True
    assert (root / "raw" / "LEDGER.jsonl").is_file() and list((root / "logs").glob("*.log"))
    assert list((root / "dagster").rglob("*.db")), "the instance's databases are checked too"
    assert _not_private(root) == []
    published = [p for name in PUBLISHED for p in _tree(root / name)]
    assert any(p.name.endswith(".parquet") for p in published)
    assert any(p.name.endswith(".bin") for p in published)
    for path in published:
        want = (0o777 if path.is_dir() else 0o666) & ~umask
        assert _mode(path) == want, f"{path.relative_to(root)} {oct(_mode(path))}"


def test_a_root_made_open_by_an_older_build_is_tightened(tmp_path: Path) -> None:
    root = tmp_path / "data"
    _build(tmp_path, root, 0o022)
    for name in PRIVATE:  # as an older build left them
        os.chmod(root / name, 0o755)
        for path in (root / name).iterdir():
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
    _build(tmp_path, root, 0o022)  # a no-op rebuild opens them again
    for name in PRIVATE:
        assert _mode(root / name) == 0o700, name
        for path in (root / name).iterdir():
            assert _mode(path) == (0o700 if path.is_dir() else 0o600), path
