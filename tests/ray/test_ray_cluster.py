"""`--ray-address`: a Ray cluster the test starts (`ray start`), and a node blind to the root."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import LocalCluster, can_unshare_mounts
from ray_support import build, corpus, outputs, write_config
from support.environment import unavailable


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A 2-CPU head with token auth from the environment; its HOME stays empty."""
    import os

    home = tmp_path_factory.mktemp("cluster-home")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(HOME=str(home), HF_HUB_OFFLINE="1", RAY_AUTH_MODE="token")
    env["RAY_AUTH_TOKEN"] = secrets.token_hex(16)
    head = LocalCluster(env, cpus=2)
    try:
        yield head
    finally:
        head.stop()
    assert sorted(home.rglob("*")) == []


def test_a_build_on_a_ray_cluster_matches_the_local_pool(
    cluster: LocalCluster, tmp_path: Path, bench_corpus: Path
) -> None:
    cfg = write_config(tmp_path, bench_corpus)
    local, root = tmp_path / "local", tmp_path / "ray"
    build(cluster.env, cfg, local, "--workers", "2")
    logs = build(cluster.env, cfg, root, "--backend", "ray", "--ray-address", cluster.address)
    assert all(f"on Ray at {cluster.address} (2 CPUs)" in log for log in logs), logs
    assert outputs(root) == outputs(local)


def test_a_node_that_cannot_see_the_data_root_fails_the_stage_early(
    cluster: LocalCluster, tmp_path: Path, bench_corpus: Path
) -> None:
    if not can_unshare_mounts():
        unavailable("a node without the data root needs `unshare -m` (root)")
    cfg = write_config(tmp_path, bench_corpus)
    root = tmp_path / "root"
    corpus(cluster.env, "run", "--stage", "fetch", "--config", str(cfg), "--root", str(root))
    cluster.add_blind_node(root)
    run = corpus(
        cluster.env,
        *("run", "--stage", "shard", "--config", str(cfg), "--root", str(root)),
        *("--backend", "ray", "--ray-address", cluster.address),
        check=False,
    )
    assert run.returncode == 64, run.stderr
    errors = [line for line in run.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in run.stderr, run.stderr
    assert "cannot see the data root" in errors[0] and "shared POSIX file system" in errors[0]
    assert not list(root.glob("work/*/shard/tasks/*.done"))  # no task ran
    assert not (root / "corpus").exists()
