"""Racing publishes to one prefix, as real `corpus publish` processes released together by a
barrier: two different builds, exactly one wins and the prefix holds its build, on moto's S3
server and in a local folder; the same build twice at once, both succeed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.corpus import environment, run_corpus
from support.mirrors import build_manifest as manifest
from support.mirrors import s3_client, s3_server

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "tiny.toml"
ROUNDS = 10

# `corpus publish ...` (the CLI's `main`, as `python -m corpus_assets.cli` runs it) with what it
# imports loaded, saying it is ready and waiting for the gate file: the racers start within a
# millisecond of each other.
GATED = """
import os, sys, time
import s3fs
from corpus_assets.cli import main
from corpus_assets.core.stages import publish, verify
gate = sys.argv[1]
open(f"{gate}.ready-{os.getpid()}", "w").close()
while not os.path.exists(gate):
    time.sleep(0.0005)
main(sys.argv[2:])
"""


@dataclass(frozen=True)
class Ended:
    code: int
    stderr: str


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two shards builds of the example whose files have the same names and other bytes."""
    base = tmp_path_factory.mktemp("builds")
    other = base / "other.toml"
    text = EXAMPLE.read_text().replace("target_mb = 0.05", "target_mb = 0.03")
    other.write_text(
        text.replace('"tiny/docs.jsonl"', json.dumps(str(EXAMPLE.parent / "tiny/docs.jsonl")))
    )
    out = []
    for name, config in (("a", EXAMPLE), ("b", other)):
        root = base / name
        for stage in ("fetch", "shard"):
            run_corpus("run", "--stage", stage, "--config", config, "--root", root, check=True)
        out.append(manifest(root, "shards").parent)
    a, b = out
    same = {p.name for p in a.iterdir()} & {p.name for p in b.iterdir()} - {"_MANIFEST.json"}
    assert any((a / n).read_bytes() != (b / n).read_bytes() for n in same)  # a name, two contents
    return a, b


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], Any]]:
    with s3_server(tmp_path_factory.mktemp("s3")) as env:
        client = s3_client(env)
        client.create_bucket(Bucket="pub")
        yield env, client


def race(folders: list[Path], url: str, gate: Path, env: dict[str, str]) -> list[Ended]:
    """`corpus publish FOLDER URL` for each folder, all released at once; how each ended."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", GATED, str(gate), "publish", str(folder), url],
            env=environment(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for folder in folders
    ]
    deadline = time.monotonic() + 60
    while len(list(gate.parent.glob(f"{gate.name}.ready-*"))) < len(procs):
        assert time.monotonic() < deadline, "the racers did not reach the gate in 60 s"
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.01)
    gate.touch()
    errs = [p.communicate(timeout=120)[1] for p in procs]
    return [Ended(p.returncode, err) for p, err in zip(procs, errs, strict=True)]


def sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_winner(ended: list[Ended], folders: list[Path], url: str) -> Path:
    """The winner's folder, after checking the loser's exit and its one line."""
    codes = sorted(e.code for e in ended)
    assert codes == [0, 65], [e.stderr for e in ended]
    win = 0 if ended[0].code == 0 else 1
    loser = ended[1 - win].stderr.strip().splitlines()
    assert len(loser) == 1, loser  # nothing uploaded, nothing else said
    for folder in folders:
        assert sha256(folder / "_MANIFEST.json") in loser[0]
    assert url in loser[0] and "one prefix holds one build" in loser[0]
    return folders[win]


def keys(client: Any, prefix: str) -> set[str]:
    listing = client.list_objects_v2(Bucket="pub", Prefix=prefix)
    return {o["Key"][len(prefix) :] for o in listing.get("Contents", [])}


@pytest.mark.timeout(400)
def test_two_builds_racing_to_one_s3_prefix_one_wins_and_the_prefix_holds_its_build(
    builds: tuple[Path, Path], s3: tuple[dict[str, str], Any], tmp_path: Path
) -> None:
    env, client = s3
    wins = []
    for n in range(ROUNDS):
        url = f"s3://pub/race/{n}"
        ended = race(list(builds), url, tmp_path / f"gate-{n}", env)
        winner = one_winner(ended, list(builds), url)
        wins.append(winner.parent.parent.parent.parent.name)
        there = client.get_object(Bucket="pub", Key=f"race/{n}/_MANIFEST.json")["Body"].read()
        assert there == (winner / "_MANIFEST.json").read_bytes()
        assert keys(client, f"race/{n}/") == {p.name for p in winner.iterdir()} | {
            ".publish-claim.json"
        }
        done = run_corpus("verify", url, env=env)
        assert done.returncode == 0, done.stderr
    print("winners:", wins)


@pytest.mark.timeout(400)
def test_two_builds_racing_to_one_local_folder_one_wins_and_the_folder_holds_its_build(
    builds: tuple[Path, Path], tmp_path: Path
) -> None:
    for n in range(ROUNDS):
        dest = tmp_path / f"dest-{n}"
        dest.mkdir()  # an empty folder: the race, not its creation, decides
        ended = race(list(builds), str(dest), tmp_path / f"gate-{n}", {})
        winner = one_winner(ended, list(builds), str(dest))
        for item in winner.iterdir():
            assert (dest / item.name).read_bytes() == item.read_bytes()
        left = {p.name for p in dest.iterdir()} - {p.name for p in winner.iterdir()}
        assert left == {".publish-claim.json"}  # no temp file, nothing of the loser
        assert run_corpus("verify", dest).returncode == 0
        assert run_corpus("verify", f"file://{dest}").returncode == 0


@pytest.mark.timeout(200)
def test_one_build_published_twice_at_once_both_succeed(
    builds: tuple[Path, Path], s3: tuple[dict[str, str], Any], tmp_path: Path
) -> None:
    env, _client = s3
    build = builds[0]
    for n, url in enumerate(("s3://pub/twice", str(tmp_path / "twice"))):
        ended = race([build, build], url, tmp_path / f"gate-{n}", env)
        assert [e.code for e in ended] == [0, 0], [e.stderr for e in ended]
        done = run_corpus("verify", url, env=env)
        assert done.returncode == 0, done.stderr
