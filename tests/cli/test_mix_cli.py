"""`corpus mix` as a command: SIGKILLed while hashing document ids, then resumed, it writes the
same index bytes as an uninterrupted run with another worker count; `corpus verify` refuses a
changed component in one line."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from support.corpus import run_corpus, start_corpus
from support.mixtures import write_build, write_config

from corpus_assets.core.mixture_config import load_mixture_config

COMPONENTS = {"web": 0.5, "code": 0.3, "math": 0.2}
SHARDS = 60


def _config(folder: Path) -> Path:
    comps = []
    for seed, (name, weight) in enumerate(COMPONENTS.items()):
        build = write_build(folder, name, SHARDS, 800, mean_tokens=20, seed=seed)
        comps.append({"name": name, "tokens": str(build), "weight": weight})
    return write_config(folder / "mix.json", comps, seq_len=16, validation_share=0.02)


def _index(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_killed_mix_resumes_to_the_same_index_bytes(tmp_path: Path) -> None:
    config = _config(tmp_path)
    key = load_mixture_config(config).partition_key
    root = tmp_path / "root"
    hashes = root / "work" / "mixtures" / key / "hashes"
    proc = start_corpus(
        "mix",
        config,
        "--root",
        root,
        "--workers",
        "1",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not list(hashes.glob("*/*.npy")) and time.monotonic() < deadline:
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    done_before = len(list(hashes.glob("*/*.npy")))
    assert 0 < done_before < len(COMPONENTS) * SHARDS  # killed mid-way, really
    assert not (root / "mixtures" / key).exists()

    resumed = run_corpus("mix", config, "--root", root, "--workers", "2", check=True)
    left = len(COMPONENTS) * SHARDS - done_before
    assert f"hashing the document ids of {left} shards" in resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["already_built"] is False and summary["partition_key"] == key
    assert not (root / "work" / "mixtures" / key).exists()

    fresh = tmp_path / "fresh"
    run_corpus("mix", config, "--root", fresh, "--workers", "3", check=True)
    assert _index(root / "mixtures" / key) == _index(fresh / "mixtures" / key)
    ok = run_corpus("verify", root / "mixtures" / key)
    assert ok.returncode == 0, ok.stderr


def test_verify_refuses_a_changed_component_in_one_line(tmp_path: Path) -> None:
    builds = {n: write_build(tmp_path, n, 2, 200, seed=i) for i, n in enumerate(("a", "b"))}
    comps = [{"name": n, "tokens": str(p), "weight": 1} for n, p in builds.items()]
    config = write_config(tmp_path / "mix.json", comps, seq_len=16)
    built = json.loads(run_corpus("mix", config, "--root", tmp_path / "root", check=True).stdout)
    manifest = builds["b"] / "_MANIFEST.json"
    manifest.write_text(manifest.read_text().replace('"v1"', '"v2"').replace("/v1/", "/v2/"))

    verify = run_corpus("verify", built["folder"])
    assert verify.returncode == 65
    lines = verify.stderr.strip().splitlines()
    assert lines[0].startswith("component 'b' of mixture mix-") and "changed since" in lines[0]
    assert lines[1] == f"corpus verify: error: {built['folder']}: 1 problem(s) found"
    again = run_corpus("mix", config, "--root", tmp_path / "root")
    assert again.returncode == 65
    (line,) = again.stderr.strip().splitlines()[-1:]
    assert line.startswith("corpus mix: error: component 'b' of mixture")


def test_register_stores_a_mixture_config(tmp_path: Path) -> None:
    build = write_build(tmp_path, "a", 1, 50)
    config = write_config(tmp_path / "mix.json", [{"name": "a", "tokens": str(build), "weight": 1}])
    root = tmp_path / "root"
    out = json.loads(run_corpus("register", config, "--root", root, check=True).stdout)
    cfg = load_mixture_config(config)
    assert (out["kind"], out["partition_key"]) == ("mixture", cfg.partition_key)
    stored = root / "mixture-configs" / f"{cfg.hash12}.json"
    assert stored.read_bytes() == cfg.canonical
    assert load_mixture_config(stored).resolve("x") == config.parent / "x"  # the origin's folder


def test_a_mixture_published_with_its_components_reads_from_s3(tmp_path: Path) -> None:
    """Published at the same relative places (as `corpus build --publish` places builds): the
    index files whole, the components' tokens by ranged reads, the same samples as on disk
    (provenance would read the shards' ids: published with them, as `TokenDataset` does)."""
    import numpy as np
    import pytest
    from support.mirrors import s3_client, s3_server

    from corpus_assets.mixture import MixtureDataset

    builds = {n: write_build(tmp_path, n, 2, 150, seed=i) for i, n in enumerate(("a", "b"))}
    comps = [{"name": n, "tokens": str(p), "weight": 1} for n, p in builds.items()]
    config = write_config(tmp_path / "mix.json", comps, seq_len=16, validation_share=0.1)
    built = json.loads(run_corpus("mix", config, "--root", tmp_path / "root", check=True).stdout)
    folder = Path(built["folder"])
    with s3_server(tmp_path / "s3") as env:
        s3_client(env).create_bucket(Bucket="pub")
        for local in [*builds.values(), folder]:  # the shards stay behind: ids are read once
            where = local.relative_to(tmp_path).as_posix()
            run_corpus("publish", local, f"s3://pub/x/{where}", env=env, check=True)
        url = f"s3://pub/x/{folder.relative_to(tmp_path).as_posix()}"
        assert run_corpus("verify", url, env=env).returncode == 0
        mp = pytest.MonkeyPatch()
        for key, value in env.items():
            mp.setenv(key, value)
        try:
            import s3fs

            s3fs.S3FileSystem.clear_instance_cache()
            remote, local = MixtureDataset(url), MixtureDataset(folder)
            assert len(remote) == len(local) > 0
            for i in range(0, len(local), 7):
                assert np.array_equal(remote[i], local[i])
            remote.close()
        finally:
            s3fs.S3FileSystem.clear_instance_cache()
            mp.undo()
