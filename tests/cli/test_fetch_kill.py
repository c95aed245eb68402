"""fetch under faults: SIGKILL at random instants then resume, and concurrent fetches."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.corpus import corpus_argv

from corpus_assets.core.stages.verify import verify_path

CorpusRunner = Callable[..., subprocess.CompletedProcess[str]]
WriteConfig = Callable[[Path, Mapping[str, Any]], Path]

EOT = "<|endoftext|>"
KILLS = 10
SEED = 20240611


def _source_key(spec: Mapping[str, Any]) -> str:
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"{spec['name']}-{hashlib.sha256(canonical.encode()).hexdigest()[:12]}"


def _config(dataset: str, *sources: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "dataset": dataset,
        "version": "v1",
        "tokenizer": {"id": "bytes"},
        "sources": list(sources),
    }


def _generate_inputs(folder: Path) -> list[dict[str, Any]]:
    """~45 MB over three sources: the big one spans two raw parts (parts close at 32 MB)."""
    rng = random.Random(SEED)
    words = [
        "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(2000)
    ]
    with open(folder / "big.jsonl", "w", encoding="utf-8") as fh:
        for i in range(19_000):
            text = " ".join(rng.choices(words, k=rng.randint(200, 400)))
            fh.write(json.dumps({"id": f"big-{i}", "text": text, "n": i}) + "\n")
    stories = (" ".join(rng.choices(words, k=rng.randint(20, 200))) for _ in range(8_000))
    (folder / "stories.txt").write_text(EOT.join(stories), encoding="utf-8")
    pq.write_table(
        pa.table({"text": [" ".join(rng.choices(words, k=50)) for _ in range(3_000)]}),
        folder / "small.parquet",
    )
    return [
        {"name": "big", "kind": "jsonl", "path": "big.jsonl", "license": "mit", "id_field": "id"},
        {
            "name": "stories",
            "kind": "text",
            "path": "stories.txt",
            "separator": EOT,
            "license": "cdla-sharing-1.0",
        },
        {"name": "small", "kind": "parquet", "path": "small.parquet", "license": "cc0-1.0"},
    ]


def _command(config_path: Path, root: Path) -> list[str]:
    return corpus_argv("run", "--stage", "fetch", "--config", config_path, "--root", root)


def _files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _ledger(root: Path) -> list[dict[str, Any]]:
    path = root / "raw" / "LEDGER.jsonl"
    lines = path.read_text("utf-8").splitlines() if path.exists() else []
    return [json.loads(line) for line in lines]


def _without_time(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k != "fetched_at"} for e in entries]


def _published(root: Path) -> list[str]:
    raw = root / "raw"
    return sorted(p.name for p in raw.iterdir() if p.is_dir() and not p.name.startswith("."))


def _leftovers(root: Path) -> list[str]:
    """Temp files, half-deleted folders and staging content anywhere under raw/."""
    raw = root / "raw"
    found = [
        str(p.relative_to(raw))
        for p in raw.rglob("*")
        if ".locks" not in p.parts and (".tmp-" in p.name or ".deleting-" in p.name)
    ]
    staging = raw / ".staging"
    if staging.exists():
        found += [str(p.relative_to(raw)) for p in staging.iterdir()]
    return found


def _check_consistent(root: Path) -> None:
    """What a reader may see at any instant: only complete, verifiable raw folders."""
    if not (root / "raw").exists():
        return
    for key in _published(root):
        assert (root / "raw" / key / "_SOURCE.json").exists(), f"raw/{key} has no _SOURCE.json"
        assert verify_path(root / "raw" / key) == []
    for entry in _ledger(root):
        assert entry["source_key"] in _published(root)


@pytest.fixture(scope="module")
def fetch_world(
    tmp_path_factory: pytest.TempPathFactory, write_config: WriteConfig
) -> dict[str, Any]:
    """Inputs, a config over them, and the raw cache of one uninterrupted fetch."""
    base = tmp_path_factory.mktemp("kill")
    inputs = base / "inputs"
    inputs.mkdir()
    specs = _generate_inputs(inputs)
    cfg = write_config(inputs / "corpus.toml", _config("killme", *specs))
    reference = base / "reference"
    start = time.monotonic()
    done = subprocess.run(_command(cfg, reference), capture_output=True, text=True, check=False)
    duration = time.monotonic() - start
    assert done.returncode == 0, done.stderr
    return {
        "base": base,
        "inputs": inputs,
        "specs": specs,
        "config": cfg,
        "reference": reference,
        "duration": duration,
        "summary": json.loads(done.stdout),
    }


def test_reference_fetch_shape(fetch_world: dict[str, Any]) -> None:
    ref = fetch_world["reference"]
    keys = [_source_key(s) for s in fetch_world["specs"]]
    assert _published(ref) == sorted(keys)
    big = sorted(p.name for p in (ref / "raw" / keys[0]).iterdir())
    assert big == ["_SOURCE.json", "part-00000.parquet", "part-00001.parquet"]
    assert [s["documents"] for s in fetch_world["summary"]["sources"]] == [19_000, 8_000, 3_000]
    assert [e["source_key"] for e in _ledger(ref)] == keys
    assert _leftovers(ref) == []


def _holds(predicate: Callable[[float], bool], elapsed: float) -> bool:
    try:
        return predicate(elapsed)
    except (OSError, ValueError):  # a folder renamed or a line half-read while we looked
        return False


def _run_until(command: list[str], kill_when: Callable[[float], bool], limit: float) -> bool:
    """Start `command`; SIGKILL it once `kill_when(elapsed)` holds. False if it ended first."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    start = time.monotonic()
    while proc.poll() is None:
        elapsed = time.monotonic() - start
        if _holds(kill_when, elapsed):
            proc.send_signal(signal.SIGKILL)
            code = proc.wait()
            if code == 0:  # it exited in the instant between poll() and the signal
                return False
            assert code == -signal.SIGKILL
            return True
        assert elapsed < limit, "fetch did not finish in time"
        time.sleep(0.002)
    assert proc.returncode == 0
    return False


def test_sigkill_at_random_points_then_resume_is_byte_identical(
    fetch_world: dict[str, Any], tmp_path: Path
) -> None:
    root = tmp_path / "root"
    raw = root / "raw"
    command = _command(fetch_world["config"], root)
    limit = 20 * fetch_world["duration"] + 10
    # first, two instants that matter: inside the second part of the big source, and
    # between sources (the big one published and in the ledger, the next one started)
    assert _run_until(command, lambda _t: any(raw.rglob("part-00001.parquet")), limit)
    _check_consistent(root)
    assert _run_until(command, lambda _t: len(_ledger(root)) >= 1, limit)
    _check_consistent(root)
    # then random instants (seeded): a resumed run has less left to do, so a run that gets to
    # finish is checked against the reference and the next one starts from an empty root
    rng = random.Random(SEED)
    killed_at: list[float] = []
    finished = 0
    while len(killed_at) < KILLS and finished < KILLS:
        delay = rng.uniform(0.05, 0.9 * fetch_world["duration"])
        if _run_until(command, lambda t, d=delay: t >= d, limit):
            killed_at.append(round(delay, 2))
            _check_consistent(root)
            continue
        finished += 1
        _check_consistent(root)
        assert _published(root) == _published(fetch_world["reference"])
        shutil.rmtree(root)
    assert len(killed_at) >= 3, f"only {len(killed_at)} kills landed ({finished} runs finished)"

    final = subprocess.run(
        _command(fetch_world["config"], root), capture_output=True, text=True, check=False
    )
    assert final.returncode == 0, final.stderr
    _check_consistent(root)

    ref = fetch_world["reference"]
    keys = [_source_key(s) for s in fetch_world["specs"]]
    assert _published(root) == _published(ref) == sorted(keys)
    for key in keys:
        assert _files(root / "raw" / key) == _files(ref / "raw" / key), f"raw/{key} differs"
    entries = _ledger(root)
    assert sorted(e["source_key"] for e in entries) == sorted(keys)  # one line per source
    assert _without_time(entries) == _without_time(_ledger(ref))
    assert _leftovers(root) == [], f"leftovers after kills at {killed_at}"
    summary = json.loads(final.stdout)
    assert summary["documents"] == fetch_world["summary"]["documents"]


def test_concurrent_fetches_of_a_shared_source(
    fetch_world: dict[str, Any], tmp_path: Path, write_config: WriteConfig
) -> None:
    inputs = fetch_world["inputs"]
    big = fetch_world["specs"][0]
    one = write_config(inputs / "one.json", _config("one", big))
    two = write_config(inputs / "two.toml", _config("two", big))
    root = tmp_path / "root"
    procs = [
        subprocess.Popen(
            _command(c, root), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for c in (one, two)
    ]
    results = [(p.communicate(timeout=120), p.returncode) for p in procs]
    for (_out, err), code in results:
        assert code == 0, err
    summaries = [json.loads(out) for (out, _err), _code in results]
    cached = sorted(s["sources"][0]["cached"] for s in summaries)
    assert cached == [False, True]  # fetched once; the other waited and found it done
    key = _source_key(big)
    assert _published(root) == [key]
    assert [e["source_key"] for e in _ledger(root)] == [key]
    assert _files(root / "raw" / key) == _files(fetch_world["reference"] / "raw" / key)
    assert _leftovers(root) == []
