"""The atomic file layer: temp + fsync + rename, staged folders published by rename."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from corpus_assets.core.store import atomic
from corpus_assets.core.store.atomic import (
    atomic_writer,
    dump_json,
    fresh_dir,
    publish_dir,
    remove_tree,
    write_bytes,
    write_json,
)


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_write_bytes_creates_parents_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "file.bin"
    write_bytes(target, b"hello")
    assert target.read_bytes() == b"hello"
    assert _names(target.parent) == ["file.bin"]
    write_bytes(target, b"replaced")
    assert target.read_bytes() == b"replaced"
    assert _names(target.parent) == ["file.bin"]


def test_a_failure_mid_write_keeps_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    write_bytes(target, b"old")
    old_inode = target.stat().st_ino
    with pytest.raises(RuntimeError, match="boom"), atomic_writer(target) as fh:
        fh.write(b"half of the new con")
        fh.flush()
        raise RuntimeError("boom")
    assert target.read_bytes() == b"old"
    assert target.stat().st_ino == old_inode
    assert _names(tmp_path) == ["out.json"]


def test_a_failure_before_the_first_write_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "new.bin"
    with pytest.raises(KeyboardInterrupt), atomic_writer(target):
        raise KeyboardInterrupt
    assert _names(tmp_path) == []


def test_the_reader_never_sees_a_partial_file(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    write_bytes(target, b"A" * 10)
    with atomic_writer(target) as fh:
        fh.write(b"B" * 1000)
        fh.flush()
        assert target.read_bytes() == b"A" * 10  # the final name still holds the old bytes
    assert target.read_bytes() == b"B" * 1000


def test_a_failed_rename_is_reported_with_the_path_and_cleans_the_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", fail)
    target = tmp_path / "x.bin"
    with pytest.raises(atomic.TransientError, match=r"cannot write .*x\.bin: No space left"):
        write_bytes(target, b"data")
    assert _names(tmp_path) == []


def test_write_json_is_stable_sorted_and_newline_terminated(tmp_path: Path) -> None:
    write_json(tmp_path / "m.json", {"b": 1, "a": {"é": [1, 2]}})
    text = (tmp_path / "m.json").read_bytes()
    assert text == dump_json({"a": {"é": [1, 2]}, "b": 1})
    assert text.endswith(b"}\n")
    assert "é".encode() in text
    assert json.loads(text) == {"a": {"é": [1, 2]}, "b": 1}


def _staged(tmp_path: Path, content: bytes) -> Path:
    staging = fresh_dir(tmp_path / ".staging" / "out")
    (staging / "sub").mkdir()
    write_bytes(staging / "sub" / "data.bin", content)
    write_bytes(staging / "_MANIFEST.json", b"{}\n")
    return staging


def test_publish_dir_moves_the_staged_folder_into_place(tmp_path: Path) -> None:
    staging = _staged(tmp_path, b"one")
    final = tmp_path / "published" / "out"
    publish_dir(staging, final)
    assert not staging.exists()
    assert (final / "sub" / "data.bin").read_bytes() == b"one"
    assert _names(final) == ["_MANIFEST.json", "sub"]


def test_publish_dir_replaces_an_existing_folder(tmp_path: Path) -> None:
    final = tmp_path / "out"
    publish_dir(_staged(tmp_path, b"one"), final)
    (final / "stale-extra-file").write_bytes(b"x")
    publish_dir(_staged(tmp_path, b"two"), final)
    assert (final / "sub" / "data.bin").read_bytes() == b"two"
    assert not (final / "stale-extra-file").exists()
    assert _names(tmp_path) == [".staging", "out"]  # no `.out.deleting-*` left beside it
    assert _names(tmp_path / ".staging") == []


def test_remove_tree(tmp_path: Path) -> None:
    doomed = tmp_path / "doomed"
    (doomed / "a" / "b").mkdir(parents=True)
    (doomed / "a" / "b" / "f").write_bytes(b"x")
    (tmp_path / "keep").write_bytes(b"k")
    remove_tree(doomed)
    assert _names(tmp_path) == ["keep"]
    remove_tree(doomed)  # absent: nothing to do
    assert _names(tmp_path) == ["keep"]


def test_fresh_dir_empties_what_was_there(tmp_path: Path) -> None:
    folder = tmp_path / "w"
    (folder / "old").mkdir(parents=True)
    (folder / "old" / "f").write_bytes(b"x")
    assert fresh_dir(folder) == folder
    assert _names(folder) == []


def test_temp_files_live_in_the_target_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rename is atomic only within one file system: the temp must sit beside the target."""
    seen: list[tuple[str, str]] = []
    real = os.replace

    def spy(src: str | Path, dst: str | Path) -> None:
        seen.append((str(src), str(dst)))
        real(src, dst)

    monkeypatch.setattr(atomic.os, "replace", spy)
    write_bytes(tmp_path / "d" / "f.bin", b"x")
    [(src, dst)] = seen
    assert Path(src).parent == Path(dst).parent == tmp_path / "d"
    assert Path(src).name != "f.bin"
