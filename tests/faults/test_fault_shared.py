"""Two builds at once share the raw cache; a disk that refuses writes loses no earlier build."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import pytest
from dagster_support import variant
from fault_support import runs_of, start_build, tree
from support.environment import unavailable
from support.processes import stage_pids

from corpus_assets.build import driver
from corpus_assets.core.config import load_config
from corpus_assets.core.stages.verify import verify_path
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.locks import hold
from corpus_assets.instance.home import ensure_home
from corpus_assets.jobs import BUILD_JOB


@pytest.mark.timeout(240)
def test_concurrent_builds_share_raw(example: Path, root: Path) -> None:
    other = variant(example, "other", shards={"target_mb": 0.02})
    cfg = load_config(example)
    lock = Layout(root.resolve()).raw_lock(cfg.source_key(cfg.model.sources[0]))
    # Hold the source's lock until both fetch stages are up, so they really race for it.
    with hold(lock, "the test's hold on the raw cache"):
        builds = [start_build(config, root) for config in (example, other)]
        deadline = time.monotonic() + 60
        while len(stage_pids(root, "fetch")) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(stage_pids(root, "fetch")) == 2, "both fetch stages should be waiting"
        time.sleep(0.5)
    outcomes = [b.communicate(timeout=200) for b in builds]
    for build, (out, err) in zip(builds, outcomes, strict=True):
        assert build.returncode == 0, err
        assert json.loads(out)["success"] is True
    layout = Layout(root.resolve())
    ledger = layout.ledger.read_text(encoding="utf-8").splitlines()
    assert len(ledger) == 1, "the shared source was fetched twice"
    assert len([p for p in layout.raw.iterdir() if p.name.startswith("tiny-")]) == 1
    fetched = [err for _, err in outcomes if "fetch: fetching source tiny" in err]
    cached = [err for _, err in outcomes if "fetch: source tiny already in raw/" in err]
    assert len(fetched) == 1 and len(cached) == 1, [err for _, err in outcomes]
    for config in (example, other):
        cfg = load_config(config)
        assert verify_path(layout.shards(cfg)) == []
        assert verify_path(layout.tokens(cfg)) == []
    with dg.DagsterInstance.from_config(str(root / "dagster")) as instance:
        runs = runs_of(instance, BUILD_JOB)
        assert sorted(r.status.value for r in runs) == ["SUCCESS", "SUCCESS"]


@contextmanager
def _tiny_disk(folder: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted at `folder` (a disk that can fill up)."""
    folder.mkdir(parents=True, exist_ok=True)
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True
    )
    if mount.returncode != 0:
        unavailable(f"a full disk needs a tmpfs mount (root): {mount.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def _fill(folder: Path, leave: int) -> Path:
    """A file that leaves only `leave` bytes free on `folder`'s filesystem."""
    st = os.statvfs(folder)
    filler = folder / "filler"
    with open(filler, "wb") as out:
        out.truncate(0)
        remaining = st.f_bavail * st.f_frsize - leave
        chunk = b"\0" * (1 << 16)
        while remaining > 0:
            remaining -= out.write(chunk[: min(len(chunk), remaining)])
    return filler


@pytest.mark.timeout(240)
def test_disk_errors_lose_nothing(example: Path, tmp_path: Path) -> None:
    """A full disk fails the build that needs the space, clearly; earlier builds stay intact."""
    home = tmp_path / "dagster-home"  # the instance lives elsewhere: only the data fills up
    with (
        _tiny_disk(tmp_path / "disk", "4m") as root,
        dg.DagsterInstance.from_config(str(ensure_home(home))) as instance,
    ):
        first = driver.build(example, root, instance)
        assert first.exit_code == 0, first.summary
        before = tree(root, "corpus", "tokens", "raw")
        other = variant(example, "other", shards={"target_mb": 0.02})
        cfg = load_config(other)
        layout = Layout(root.resolve())
        filler = _fill(root, leave=48 * 1024)
        failed = driver.build(other, root, instance)
        assert failed.exit_code != 0 and failed.summary["success"] is False
        assert failed.summary["stages"]["tokenize"] != "materialized"
        error = failed.summary["error"]
        assert error.startswith("shards: cannot write "), error  # the stage's sentence first
        assert "`corpus run --stage shard` exit 75 (transient)" in error, error
        assert f"cannot write {root}/work/{cfg.hash12}/" in error, error
        assert "no space left on device" in error.lower(), error
        assert tree(root, "corpus", "tokens", "raw") == before, "an earlier build changed"
        for manifest in ("shards_manifest", "tokens_manifest"):
            assert verify_path(root / first.summary[manifest]) == []
        assert not (layout.tokens(cfg) / "_MANIFEST.json").exists()

        # Once there is space again, the same build completes.
        filler.unlink()
        again = driver.build(other, root, instance)
        assert again.exit_code == 0, again.summary
        assert verify_path(layout.tokens(cfg)) == []
