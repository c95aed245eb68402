"""A data root that cannot be one: exit 64, one line naming it, nothing written, every command."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CorpusRunner = Callable[..., subprocess.CompletedProcess[str]]
COMMANDS = {
    "build": ["build", "{config}"],
    "register": ["register", "{config}"],
    "run": ["run", "--stage", "fetch", "--config", "{config}"],
    "cleanup": ["cleanup", "--config", "{config}"],
    "ui": ["ui", "--port", "1"],
}
PROCFS = Path("/proc/self").is_dir()


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _example(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "examples" / "tiny", tmp_path / "tiny")
    return Path(shutil.copy(REPO / "examples" / "tiny.toml", tmp_path / "tiny.toml"))


def _bad_root(tmp_path: Path, kind: str) -> tuple[str, str]:
    """(the root to pass, what the message must say) for one kind of bad root."""
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder\n")
    if kind == "file":
        return str(a_file), "is a file, not a folder"
    if kind == "under a file":
        return str(a_file / "sub"), f"{a_file} is a file, not a folder"
    # Permission bits do not bind root, so these use folders no one can write in: procfs
    # refuses new files and folders even to root.
    if kind == "not writable":
        return "/proc", "not writable"
    return "/proc/corpus-test-root", "cannot be created"


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("kind", ["file", "under a file", "not writable", "cannot be created"])
def test_bad_root_is_exit_64_in_one_line(
    corpus: CorpusRunner, tmp_path: Path, command: str, kind: str
) -> None:
    if kind in ("not writable", "cannot be created") and not PROCFS:
        pytest.skip("needs /proc (a folder that refuses writes even to root)")
    config = _example(tmp_path)
    root, says = _bad_root(tmp_path, kind)
    before = _tree(tmp_path)
    args = [a.format(config=config) for a in COMMANDS[command]]
    done = corpus(*args, "--root", root)
    assert done.returncode == 64, done.stderr
    [line] = done.stderr.splitlines()
    assert line == f"corpus {command}: error: data root {root}: {says}" or (
        line.startswith(f"corpus {command}: error: data root {root}: {says} (")
    ), line
    assert _tree(tmp_path) == before, "a bad root must not write anything"
    assert not Path("/proc/corpus-test-root").exists()


def test_bad_root_from_the_environment(corpus: CorpusRunner, tmp_path: Path) -> None:
    config = _example(tmp_path)
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    done = corpus("run", "--stage", "fetch", "--config", config, env={"CORPUS_ROOT": str(a_file)})
    assert done.returncode == 64
    assert done.stderr.splitlines() == [
        f"corpus run: error: data root {a_file}: is a file, not a folder (--root or $CORPUS_ROOT)"
    ]


def _as_a_user() -> list[str]:
    """A command prefix under which permission bits bind: nothing for a user; for root (CI),
    `setpriv` dropping the capabilities that let root write anywhere (CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH), so root is refused as its folders' modes say."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("running as root needs setpriv (util-linux) to test permission bits")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--"]


def test_read_only_folder_as_a_user(tmp_path: Path) -> None:
    config = _example(tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    cmd = [*_as_a_user(), sys.executable, "-m", "corpus_assets.cli", "run", "--stage", "fetch"]
    done = subprocess.run(
        [*cmd, "--config", str(config), "--root", str(locked)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 64, done.stderr
    assert done.stderr.splitlines() == [
        f"corpus run: error: data root {locked}: not writable (Permission denied)"
    ]
    assert list(locked.iterdir()) == []


def test_a_new_root_is_fine_and_the_probe_leaves_nothing(
    corpus: CorpusRunner, tmp_path: Path
) -> None:
    """A root that does not exist yet is made by the stage; the check itself leaves nothing."""
    config = _example(tmp_path)
    root = tmp_path / "new" / "deeper" / "root"
    bad = config.with_name("bad.json")
    bad.write_text('{"dataset": "x", "version": "v1", "tokenizer": {"id": "bytes"}, "oops": 1}')
    refused = corpus("run", "--stage", "fetch", "--config", bad, "--root", root)
    assert refused.returncode == 64 and "unknown key 'oops'" in refused.stderr
    assert not (tmp_path / "new").exists(), "the root check must not leave the root behind"
    done = corpus("run", "--stage", "fetch", "--config", config, "--root", root)
    assert done.returncode == 0, done.stderr
    assert (root / "raw" / "LEDGER.jsonl").is_file()
    assert not [p for p in root.iterdir() if p.name.startswith(".corpus-probe")]
