"""`--ray-shared-root no`: every task on a Ray node that cannot see the data root.

One cluster for the module: a head with no CPUs for tasks and one node of 1 CPU in its own mount
namespace with an empty tmpfs over the folder that holds every data root of these tests, so a
task can only run where the root is not. The bytes are the local pool's; kills of a worker and
of the stage process are survived and resumed, on Ray and on the local pool.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import LocalCluster, can_unshare_mounts
from ray_support import REPO, build, corpus, outputs, write_config
from support.corpus import start_corpus
from support.environment import unavailable
from support.processes import descendants, processes, running
from support.waiting import wait_for

NO_SHARED_ROOT = ("--ray-shared-root", "no")


class Blind:
    """The cluster, the folder its task node cannot see, the workers' temporary folder."""

    def __init__(self, cluster: LocalCluster, hidden: Path, temp: Path) -> None:
        self.cluster, self.hidden, self.temp = cluster, hidden, temp

    def ray(self) -> tuple[str, ...]:
        return ("--backend", "ray", "--ray-address", self.cluster.address, *NO_SHARED_ROOT)

    def busy_worker(self, title: str) -> int | None:
        """A worker of the blind node running task `title` right now."""
        under = set(descendants(self.cluster.procs[-1].pid))
        for proc in processes():
            if proc.pid in under and proc.cmdline.startswith(f"ray::{title}".encode()):
                return proc.pid
        return None


@pytest.fixture(scope="module")
def blind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Blind]:
    if not can_unshare_mounts():
        unavailable("a node without the data root needs `unshare -m` (root)")
    home = tmp_path_factory.mktemp("blind-home")
    hidden = tmp_path_factory.mktemp("hidden")
    temp = Path(tempfile.mkdtemp(prefix="rn", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(HOME=str(home), HF_HUB_OFFLINE="1", TMPDIR=str(temp), RAY_AUTH_MODE="token")
    env["RAY_AUTH_TOKEN"] = secrets.token_hex(16)
    cluster = LocalCluster(env, cpus=0)
    try:
        cluster.add_blind_node(hidden)
        yield Blind(cluster, hidden, temp)
    finally:
        cluster.stop()
        shutil.rmtree(temp, ignore_errors=True)
    assert sorted(home.rglob("*")) == []


def _killing_a_worker(
    blind: Blind, argv: list[str], title: str
) -> subprocess.CompletedProcess[str]:
    """Run `corpus ARGV`; SIGKILL the first worker of the blind node seen running `title`."""
    env = blind.cluster.env
    proc = start_corpus(*argv, environ=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    killed = None
    deadline = time.monotonic() + 240
    while proc.poll() is None and killed is None and time.monotonic() < deadline:
        pid = blind.busy_worker(title)
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            killed = pid
            wait_for(lambda p=pid: not running(p), 10, f"worker {pid} to die")
        time.sleep(0.002)
    out, err = proc.communicate(timeout=240)
    assert killed is not None, f"no worker was caught running {title}: {err}"
    assert proc.returncode == 0, err
    assert f"Worker PID: {killed} " in err, err  # Ray saw it die mid-task, and ran it again
    assert f"Task {title} failed. There are 3 retries remaining" in err, err
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_a_build_on_a_blind_node_matches_the_local_pool(
    blind: Blind, tmp_path: Path, bench_corpus: Path
) -> None:
    env = blind.cluster.env
    cfg = write_config(tmp_path, bench_corpus)
    local, root = tmp_path / "local", blind.hidden / "build"
    build(env, cfg, local, "--workers", "2")
    common = ["--config", str(cfg), "--root", str(root)]
    corpus(env, "run", "--stage", "fetch", *common)
    ray = ("--backend", "ray", "--ray-address", blind.cluster.address)
    shared = corpus(env, "run", "--stage", "shard", *common, *ray, check=False)
    assert shared.returncode == 64 and "cannot see the data root" in shared.stderr  # it is blind
    # a worker SIGKILLed while it runs a shard task: the task runs again
    run = _killing_a_worker(blind, ["run", "--stage", "shard", *common, *blind.ray()], "run_task")
    assert "(1 CPUs), no shared root" in run.stderr, run.stderr
    assert "shards as Ray tasks" in run.stderr and "LSH bands as Ray tasks" in run.stderr
    # two tokenize stages of the build at once: one runs, the other waits and reuses it
    argv = ["run", "--stage", "tokenize", *common, *blind.ray()]
    two = [start_corpus(*argv, environ=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)]
    two.append(start_corpus(*argv, environ=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    logs = [p.communicate(timeout=300)[1] for p in two]
    assert [p.returncode for p in two] == [0, 0], logs
    assert len([log for log in logs if "no shared root" in log]) == 1, logs
    assert len([log for log in logs if "waiting for the tokenize stage" in log]) == 1, logs
    assert outputs(root) == outputs(local)
    assert list(blind.temp.glob("corpus-task-*")) == []  # the killed worker's folder too


def test_stages_killed_on_ray_and_on_the_local_pool_resume_on_the_other(
    blind: Blind, tmp_path: Path, bench_corpus: Path
) -> None:
    env = blind.cluster.env
    cfg = write_config(tmp_path, bench_corpus)
    local, root = tmp_path / "local", blind.hidden / "resumed"
    build(env, cfg, local, "--workers", "2")
    common = ["--config", str(cfg), "--root", str(root)]
    corpus(env, "run", "--stage", "fetch", *common)
    done = lambda: len(list(root.glob("work/*/shard/tasks/*.done")))  # noqa: E731
    finished = 0
    for backend in (("--workers", "1"), blind.ray()):  # killed on one, resumed on the other
        proc = start_corpus(
            "run", "--stage", "shard", *common, *backend, environ=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        wait_for(
            lambda p=proc, n=finished: done() > n or p.poll() is not None, 120, "a new shard task"
        )
        os.killpg(proc.pid, signal.SIGKILL)  # the driver: the cluster's worker is not under it
        err = proc.communicate()[1]
        assert proc.returncode == -signal.SIGKILL, f"the stage finished before the kill: {err}"
        if finished:
            assert f"resuming: {finished} of" in err, err
        finished = done()
    run = corpus(env, "run", "--stage", "shard", *common, "--workers", "2")
    assert f"resuming: {finished} of" in run.stderr, run.stderr
    # a worker SIGKILLed while it tokenizes a shard: the task runs again
    _killing_a_worker(blind, ["run", "--stage", "tokenize", *common, *blind.ray()], "ray_task")
    assert outputs(root) == outputs(local)


def test_corpus_build_of_the_example_on_a_blind_node(blind: Blind, tmp_path: Path) -> None:
    env = blind.cluster.env
    example = tmp_path / "tiny.toml"
    shutil.copy(REPO / "examples" / "tiny.toml", example)
    shutil.copytree(REPO / "examples" / "tiny", tmp_path / "tiny")
    local, ray = tmp_path / "local", blind.hidden / "example"
    a = json.loads(corpus(env, "build", str(example), "--root", str(local)).stdout)
    b = json.loads(corpus(env, "build", str(example), "--root", str(ray), *blind.ray()).stdout)
    assert a["success"] and b["success"], (a, b)
    assert a["partition_key"] == b["partition_key"]  # an execution setting: same identity
    assert outputs(ray) == outputs(local)
    logs = "\n".join(p.read_text() for p in (ray / "logs").glob("*.log"))
    for stage in ("shard", "tokenize"):  # the stage runner passed the setting to both
        assert f"{stage}: running tasks on Ray at {blind.cluster.address}" in logs, logs[-3000:]
        assert "no shared root" in logs


def test_what_every_task_reads_goes_to_the_blind_node_once(
    blind: Blind, tmp_path: Path, bench_corpus: Path
) -> None:
    """Boilerplate lines, an eval set's index and an id list: the shard stage's shared inputs."""
    env = blind.cluster.env
    cfg = write_config(tmp_path, bench_corpus)
    docs = [json.loads(line) for line in (bench_corpus / "part-00000.jsonl").open()][:40]
    (tmp_path / "eval.jsonl").write_text(
        "".join(json.dumps({"q": d["text"]}) + "\n" for d in docs[:20]), encoding="utf-8"
    )
    (tmp_path / "ids.txt").write_text("".join(d["id"] + "\n" for d in docs[20:]), encoding="utf-8")
    config = json.loads(cfg.read_text(encoding="utf-8"))
    config["filters"] = {"boilerplate_max_documents": 5}
    config["decontaminate"] = {"sets": [{"name": "e", "path": "eval.jsonl", "fields": ["q"]}]}
    config["exclude"] = {"ids": [{"name": "used", "path": "ids.txt"}]}
    cfg.write_text(json.dumps(config), encoding="utf-8")
    local, root = tmp_path / "local", blind.hidden / "screened"
    summaries = []
    for where, backend in ((local, ("--workers", "2")), (root, blind.ray())):
        common = ["--config", str(cfg), "--root", str(where)]
        corpus(env, "run", "--stage", "fetch", *common)
        run = corpus(env, "run", "--stage", "shard", *common, *backend)
        summaries.append(json.loads(run.stdout))
    assert "no shared root" in run.stderr, run.stderr
    assert summaries[0] == summaries[1]
    assert summaries[1]["contaminated"] and summaries[1]["excluded"], summaries[1]
    assert outputs(root) == outputs(local)
