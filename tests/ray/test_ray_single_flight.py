"""Single flight on the Ray backend: three shard stages, then three tokenize stages, of one
build at once on one root. One runs (starting its local Ray), the others wait without starting
one, then reuse its result; the bytes are the local pool's."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ray_support import build, corpus, outputs, ray_env, write_config
from support.corpus import start_corpus

TRIALS = 2


def _three(env: dict[str, str], *args: str) -> list[subprocess.CompletedProcess[str]]:
    procs = [
        start_corpus(*args, environ=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(3)
    ]
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def test_three_ray_stages_of_one_build_at_once(
    tmp_path: Path, bench_corpus: Path, home: Path, short_tmp: Path
) -> None:
    env = ray_env(home, short_tmp)
    cfg = write_config(tmp_path, bench_corpus)
    local = tmp_path / "local"
    build(env, cfg, local, "--workers", "2")
    reference = outputs(local)
    for trial in range(TRIALS):
        root = tmp_path / f"ray{trial}"
        common = ("--config", str(cfg), "--root", str(root), "--backend", "ray", "--workers", "2")
        corpus(env, "run", "--stage", "fetch", "--config", str(cfg), "--root", str(root))
        for stage in ("shard", "tokenize"):
            done = _three(env, "run", "--stage", stage, *common)
            assert [d.returncode for d in done] == [0, 0, 0], [d.stderr for d in done]
            started = [d for d in done if "on a local Ray" in d.stderr]
            assert len(started) == 1, f"{stage}: one stage runs (and starts Ray), two reuse"
            waited = [d for d in done if f"waiting for the {stage} stage" in d.stderr]
            assert waited, f"trial {trial}: no {stage} stage waited"
            if stage == "shard":
                assert sorted(json.loads(d.stdout)["cached"] for d in done) == [False, True, True]
        assert outputs(root) == reference
    assert list(short_tmp.iterdir()) == []  # every local Ray stopped, its folder removed
