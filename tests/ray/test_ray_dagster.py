"""The Dagster side: `corpus build --backend ray` and the stage runner's execution settings."""

from __future__ import annotations

import json
import shutil
import socket
import time
from pathlib import Path

import pytest
from ray_support import REPO, corpus, outputs, ray_env, write_config

from corpus_assets.resources.stage_runner import StageRunner


def test_stage_runner_passes_backend_and_address_to_shard_and_tokenize_only() -> None:
    cfg, root = Path("c.toml"), Path("r")
    runner = StageRunner(backend="ray", ray_address="10.0.0.1:6379", workers=4)
    ray = ["--backend", "ray", "--ray-address", "10.0.0.1:6379"]
    for stage in ("shard", "tokenize"):
        args = runner.stage_args(stage, cfg, root)
        assert args[-len(ray) :] == ray and "--workers" in args
    assert "--backend" not in runner.stage_args("fetch", cfg, root)
    assert "--backend" not in StageRunner().stage_args("shard", cfg, root)
    local_ray = StageRunner(backend="ray").stage_args("tokenize", cfg, root)
    assert local_ray[-2:] == ["--backend", "ray"]
    # an address without the ray backend reaches the stage, which refuses it (exit 64)
    stray = StageRunner(ray_address="h:1").stage_args("shard", cfg, root)
    assert stray[-2:] == ["--ray-address", "h:1"] and "--backend" not in stray
    nothing = StageRunner(backend="ray", ray_shared_root=False)
    for stage in ("shard", "tokenize"):
        assert nothing.stage_args(stage, cfg, root)[-4:] == [
            *("--backend", "ray", "--ray-shared-root", "no")
        ]
    assert "--ray-shared-root" not in nothing.stage_args("fetch", cfg, root)
    assert "--ray-shared-root" not in runner.stage_args("shard", cfg, root)


def test_ray_address_without_the_ray_backend_is_a_usage_error(tmp_path: Path) -> None:
    run = corpus(
        ray_env(tmp_path, tmp_path),
        *("run", "--stage", "shard", "--config", "c.toml", "--ray-address", "h:1"),
        check=False,
    )
    assert run.returncode == 64 and "--ray-address needs --backend ray" in run.stderr
    run = corpus(
        ray_env(tmp_path, tmp_path),
        *("run", "--stage", "shard", "--config", "c.toml", "--ray-shared-root", "no"),
        check=False,
    )
    assert run.returncode == 64 and "--ray-shared-root no needs --backend ray" in run.stderr


def test_an_unreachable_ray_address_is_exit_75_in_one_line(
    tmp_path: Path, bench_corpus: Path, home: Path, short_tmp: Path
) -> None:
    env = ray_env(home, short_tmp)
    cfg = write_config(tmp_path, bench_corpus)
    common = ("--config", str(cfg), "--root", str(tmp_path / "root"))
    corpus(env, "run", "--stage", "fetch", *common)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    run = corpus(
        env,
        "run",
        "--stage",
        "shard",
        *common,
        "--backend",
        "ray",
        "--ray-address",
        address,
        check=False,
    )
    assert run.returncode == 75, run.stderr
    errors = [line for line in run.stderr.splitlines() if "error:" in line]
    assert errors == [
        f"corpus run: error: cannot connect to Ray at {address}: Connection refused; is the "
        "cluster's head running there (`ray start --head`)?"
    ], run.stderr


def test_a_ray_address_that_drops_packets_is_exit_75_after_the_tcp_check(
    tmp_path: Path, bench_corpus: Path, home: Path, short_tmp: Path
) -> None:
    """A listening socket whose accept queue is full drops further SYNs, as a firewall does:
    the TCP check gives up after its timeout (10 s), where Ray would keep trying."""
    env = ray_env(home, short_tmp)
    cfg = write_config(tmp_path, bench_corpus)
    common = ("--config", str(cfg), "--root", str(tmp_path / "root"))
    corpus(env, "run", "--stage", "fetch", *common)
    with socket.socket() as head, socket.socket() as filler, socket.socket() as probe:
        head.bind(("127.0.0.1", 0))
        head.listen(0)
        filler.connect(head.getsockname())  # the one place in the queue, never accepted
        probe.settimeout(1.0)
        with pytest.raises(TimeoutError):  # a further connection now waits unanswered
            probe.connect(head.getsockname())
        address = f"127.0.0.1:{head.getsockname()[1]}"
        start = time.monotonic()
        run = corpus(
            env, "run", "--stage", "shard", *common, "--backend", "ray", "--ray-address", address,
            check=False,
        )  # fmt: skip
        took = time.monotonic() - start
    assert run.returncode == 75, run.stderr
    errors = [line for line in run.stderr.splitlines() if "error:" in line]
    assert errors == [
        f"corpus run: error: cannot connect to Ray at {address}: timed out; is the "
        "cluster's head running there (`ray start --head`)?"
    ], run.stderr
    assert took < 60, f"the check gave up only after {took:.1f} s"


def test_corpus_build_on_ray_builds_the_same_partition_and_bytes(
    tmp_path: Path, home: Path, short_tmp: Path
) -> None:
    env = ray_env(home, short_tmp)
    example = tmp_path / "tiny.toml"
    shutil.copy(REPO / "examples" / "tiny.toml", example)
    shutil.copytree(REPO / "examples" / "tiny", tmp_path / "tiny")
    local, ray = tmp_path / "local", tmp_path / "ray"
    a = json.loads(corpus(env, "build", str(example), "--root", str(local)).stdout)
    b = json.loads(
        corpus(env, "build", str(example), "--root", str(ray), "--backend", "ray").stdout
    )
    assert a["success"] and b["success"], (a, b)
    assert a["partition_key"] == b["partition_key"]  # an execution setting: same identity
    assert outputs(ray) == outputs(local)
    logs = "\n".join(p.read_text() for p in (ray / "logs").glob("*.log"))
    for stage in ("shard", "tokenize"):  # the stage runner passed --backend ray to both
        assert f"{stage}: running tasks on a local Ray" in logs, logs[-3000:]
    assert "fetch: running tasks" not in logs
