"""Single flight: concurrent starts of one stage, or one build, of one config on one root.

Each trial starts three at once: every process exits 0, exactly one does the work while the
others wait (saying who holds the lock) and reuse it, and the published files are byte-identical
to a lone build's on another root. A holder SIGKILLed mid-stage is taken over by a waiter; a
cleanup never removes what a live or a newer build wrote.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fault_support import tree
from support.corpus import run_corpus, start_corpus
from support.waiting import wait_for

from corpus_assets.core.config import load_config
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.locks import read_holder

REPO = Path(__file__).resolve().parents[2]
TRIALS = 10
WriteConfig = Callable[[Path, Mapping[str, Any]], Path]


@dataclass(frozen=True)
class Build:
    """A generated corpus, its config, and the files a lone build of it publishes."""

    config: Path
    hash12: str
    reference: dict[str, str]

    @property
    def shards(self) -> dict[str, str]:
        """The reference's shards build (its `corpus/` files)."""
        return {k: v for k, v in self.reference.items() if k.startswith("corpus/")}

    def lock(self, root: Path, stage: str) -> Path:
        return Layout(root).stage_lock(self.hash12, stage)

    def start_holding(self, folder: Path, name: str, root: Path) -> Started:
        """A shard stage of the build on `root` (fetched first), once it holds the lock."""
        fetched = root / "raw" / "LEDGER.jsonl"
        if not fetched.exists():
            corpus_ok("run", "--stage", "fetch", "--config", self.config, "--root", root)
        holder = start(folder, name, *self.shard_args(root))
        lock = self.lock(root, "shard")
        wait_for(lambda: (h := read_holder(lock)) and h.pid == holder.proc.pid, 60, "the lock")
        return holder

    def shard_args(self, root: Path) -> tuple[str | Path | int, ...]:
        return (
            "run",
            "--stage",
            "shard",
            "--config",
            self.config,
            "--root",
            root,
            "--workers",
            "2",
        )


@dataclass
class Started:
    """A `corpus` process started in its own process group, stdout and stderr to files."""

    proc: subprocess.Popen[str]
    out: Path
    err: Path

    def finish(self, timeout: float = 300) -> tuple[int, str, str]:
        code = self.proc.wait(timeout=timeout)
        return code, self.out.read_text(), self.err.read_text()

    def stderr(self) -> str:
        return self.err.read_text()


def start(folder: Path, name: str, *args: str | Path | int) -> Started:
    folder.mkdir(parents=True, exist_ok=True)
    out, err = folder / f"{name}.out", folder / f"{name}.err"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = start_corpus(
            *args, stdout=o, stderr=e, stdin=subprocess.DEVNULL, start_new_session=True
        )
    return Started(proc, out, err)


def corpus_ok(*args: str | Path) -> str:
    return run_corpus(*args, check=True).stdout


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    """A 6 MB corpus (every stage lasts a second or more), GPT-2 tokens, built once alone."""
    base = tmp_path_factory.mktemp("single-flight")
    make = [sys.executable, str(REPO / "bench" / "make_corpus.py"), "--out", str(base / "src")]
    subprocess.run([*make, "--mb", "6"], check=True, capture_output=True)
    config = base / "sf.toml"
    config.write_text(
        'dataset = "sf"\nversion = "v1"\n\n[tokenizer]\nid = "gpt2"\n'
        f'path = "{REPO / "data" / "tokenizers" / "gpt2" / "tokenizer.json"}"\n\n'
        '[[sources]]\nname = "gen"\nkind = "jsonl"\npath = "src/*.jsonl"\nid_field = "id"\n'
        'license = "cc0-1.0"\n\n[shards]\ntarget_mb = 0.5\n',
        encoding="utf-8",
    )
    lone = base / "lone"
    for stage in ("fetch", "shard", "tokenize"):
        corpus_ok("run", "--stage", stage, "--config", config, "--root", lone)
    return Build(config, load_config(config).hash12, tree(lone, "corpus", "tokens"))


def three_at_once(folder: Path, *args: str | Path | int) -> list[tuple[int, str, str]]:
    started = [start(folder, f"p{i}", *args) for i in range(3)]
    return [s.finish() for s in started]


def test_three_shard_stages_at_once(build: Build, tmp_path: Path) -> None:
    root = tmp_path / "root"
    corpus_ok("run", "--stage", "fetch", "--config", build.config, "--root", root)
    for trial in range(TRIALS):
        corpus_ok("cleanup", "--config", build.config, "--root", root)
        done = three_at_once(tmp_path / f"t{trial}", *build.shard_args(root))
        assert [code for code, _, _ in done] == [0, 0, 0], [err for _, _, err in done]
        cached = sorted(json.loads(out)["cached"] for _, out, _ in done)
        assert cached == [False, True, True], f"trial {trial}: one builds, two reuse"
        waited = [err for _, _, err in done if "waiting for the shard stage" in err]
        assert waited, f"trial {trial}: no stage waited, so the three did not overlap"
        assert "held by pid " in waited[0]
        assert tree(root, "corpus") == build.shards
        assert not (root / "work" / build.hash12 / "shard").exists()  # no staging left


def test_three_tokenize_stages_at_once(build: Build, tmp_path: Path) -> None:
    root = tmp_path / "root"
    for stage in ("fetch", "shard"):
        corpus_ok("run", "--stage", stage, "--config", build.config, "--root", root)
    tokens = Layout(root).tokens(load_config(build.config))
    for trial in range(TRIALS):
        if tokens.exists():
            subprocess.run(["rm", "-rf", str(tokens)], check=True)
        args = ("run", "--stage", "tokenize", "--config", build.config, "--root", root)
        done = three_at_once(tmp_path / f"t{trial}", *args, "--workers", "2")
        assert [code for code, _, _ in done] == [0, 0, 0], [err for _, _, err in done]
        reused = [err for _, _, err in done if "tokens already built in" in err]
        assert len(reused) == 2, f"trial {trial}: one builds, two reuse"
        assert any("waiting for the tokenize stage" in err for _, _, err in done)
        assert len({out for _, out, _ in done}) == 1  # the same summary, manifest included
        assert tree(root, "corpus", "tokens") == build.reference


def test_three_corpus_builds_at_once(build: Build, tmp_path: Path) -> None:
    for trial in range(TRIALS):
        root = tmp_path / f"root{trial}"
        done = three_at_once(tmp_path / f"t{trial}", "build", build.config, "--root", root)
        assert [code for code, _, _ in done] == [0, 0, 0], [err for _, _, err in done]
        built = tree(root, "corpus", "tokens")
        # the report (REPORT.md, report.json, plots) lies beside the manifest, outside its digests
        assert {k: v for k, v in built.items() if "/report" not in k.lower()} == build.reference
        assert len({out for _, out, _ in done}) == 1  # the same summary, checks passed
        assert json.loads(done[0][1])["success"] is True


def test_a_killed_holder_is_taken_over_by_one_waiter_and_reused_by_the_other(
    build: Build, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    holder = build.start_holding(tmp_path, "holder", root)
    tasks = root / "work" / build.hash12 / "shard" / "tasks"
    wait_for(lambda: tasks.is_dir() and any(tasks.glob("*.done")), 60, "a finished task")
    os.killpg(holder.proc.pid, signal.SIGSTOP)  # mid-phase-1, however fast the machine is
    waiters = [start(tmp_path, f"w{i}", *build.shard_args(root)) for i in range(2)]
    for w in waiters:
        wait_for(lambda w=w: "waiting for the shard stage" in w.stderr(), 120, "a waiter")
    os.killpg(holder.proc.pid, signal.SIGKILL)
    assert holder.proc.wait(timeout=30) == -signal.SIGKILL
    done = [w.finish() for w in waiters]
    assert [code for code, _, _ in done] == [0, 0], [err for _, _, err in done]
    # the killed holder published nothing: one waiter built (resuming its tasks), one reused
    cached = sorted(json.loads(out)["cached"] for _, out, _ in done)
    assert cached == [False, True]
    builder = next(err for _, out, err in done if not json.loads(out)["cached"])
    assert "resuming:" in builder
    assert f"held by pid {holder.proc.pid} " in "".join(err for _, _, err in done)
    assert tree(root, "corpus") == build.shards


def test_a_cleanup_waits_for_a_live_build_and_keeps_what_it_published(
    build: Build, tmp_path: Path
) -> None:
    """The sensors' cleanup, decided while a newer build of the partition was running: it waits
    for that build's stage, then keeps the build it published."""
    root = tmp_path / "root"
    live = build.start_holding(tmp_path, "live", root)
    os.killpg(live.proc.pid, signal.SIGSTOP)  # still building when the cleanup arrives
    decided = time.time()
    cleanup = start(
        tmp_path,
        "cleanup",
        *("cleanup", "--config", build.config, "--root", root, "--keep-newer-than", decided),
    )
    wait_for(lambda: "waiting for the shard stage" in cleanup.stderr(), 120, "the cleanup waits")
    assert not (Layout(root).shards(load_config(build.config)) / "_MANIFEST.json").exists()
    os.killpg(live.proc.pid, signal.SIGCONT)
    assert live.finish()[0] == 0
    code, out, err = cleanup.finish()
    assert code == 0, err
    assert json.loads(out)["removed"] == []
    assert "was published after the cleanup was decided, by a newer build; kept" in err
    assert tree(root, "corpus") == build.shards
    corpus_ok("verify", Layout(root).shards(load_config(build.config)))


def test_a_cleanup_keeps_a_newer_build_and_removes_an_older_one(
    build: Build, tmp_path: Path
) -> None:
    """Against a whole build: published after the decision, kept; before it, removed."""
    root = tmp_path / "root"
    decided = time.time()
    for stage in ("fetch", "shard", "tokenize"):
        corpus_ok("run", "--stage", stage, "--config", build.config, "--root", root)
    keep = ("cleanup", "--config", build.config, "--root", root)
    kept = json.loads(corpus_ok(*keep, "--keep-newer-than", str(decided)))
    assert kept["removed"] == [] and "kept" in kept
    assert tree(root, "corpus", "tokens") == build.reference
    removed = json.loads(corpus_ok(*keep, "--keep-newer-than", str(time.time())))
    assert [p.split("/")[0] for p in removed["removed"]] == ["corpus", "tokens", "work"]
    assert tree(root, "corpus", "tokens") == {}
    assert tree(root, "raw")  # never the raw cache


@pytest.mark.timeout(900)
def test_a_backfill_of_a_partition_that_corpus_build_is_building_waits_in_the_queue(
    build: Build, tmp_path: Path
) -> None:
    """The daemon's backfill run of the partition stays QUEUED while `corpus build` runs it,
    then runs as a no-op: one execution, the bytes of a lone build."""
    import dagster as dg
    from daemon_support import running_daemon

    with running_daemon(tmp_path) as daemon:
        key = load_config(build.config).partition_key
        cli = daemon.corpus("build", str(build.config))
        tags = {"dagster/partition": key}
        with daemon.instance() as instance:
            first = wait_for(
                lambda: instance.get_runs(
                    dg.RunsFilter(tags=tags, statuses=[dg.DagsterRunStatus.STARTED])
                ),
                120,
                "corpus build's run",
            )[0]
        backfill = subprocess.run(
            [str(Path(sys.executable).with_name("dagster")), "job", "backfill", "-w",
             str(REPO / "workspace.yaml"), "-j", "corpus_build", "--partitions", key, "--noprompt"],
            env=daemon.env, cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert backfill.returncode == 0, backfill.stdout + backfill.stderr
        _, err = cli.communicate(timeout=300)
        assert cli.returncode == 0, err

        def second_run_over() -> dg.RunRecord | None:
            with daemon.instance() as instance:
                records = instance.get_run_records(dg.RunsFilter(tags=tags))
            others = [r for r in records if r.dagster_run.run_id != first.run_id]
            return others[0] if others and others[0].dagster_run.is_finished else None

        second = wait_for(second_run_over, 600, "the backfill's run to finish")
        with daemon.instance() as instance:
            before = instance.get_run_record_by_id(first.run_id)
            assert before is not None and before.end_time is not None
            assert second.dagster_run.status == dg.DagsterRunStatus.SUCCESS
            assert "dagster/backfill" in second.dagster_run.tags
            events = {
                r.event_log_entry.dagster_event_type
                for r in instance.get_records_for_run(second.dagster_run.run_id).records
            }
        assert dg.DagsterEventType.RUN_ENQUEUED in events
        assert second.start_time is not None and second.start_time >= before.end_time
        built = tree(daemon.root, "corpus", "tokens")
        assert {k: v for k, v in built.items() if "/report" not in k.lower()} == build.reference
