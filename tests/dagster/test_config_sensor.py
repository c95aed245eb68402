"""The config sensor: configs dropped into <root>/inbox become partitions and one build each."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from dagster_support import variant

from corpus_assets.core.config import load_config
from corpus_assets.core.mixture_config import load_mixture_config
from corpus_assets.resources.configs import ConfigStore
from corpus_assets.resources.partitions import CORPUS_CONFIGS, MIXTURE_CONFIGS
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.sensors.config import corpus_config_sensor

REPO = Path(__file__).resolve().parents[2]


def _tick(instance: dg.DagsterInstance, root: Path, cursor: str | None) -> object:
    paths = CorpusPaths(root=str(root))
    with dg.build_sensor_context(
        instance=instance,
        cursor=cursor,
        resources={"paths": paths, "configs": ConfigStore(paths=paths)},
    ) as context:
        return corpus_config_sensor(context)


def test_dropped_configs_are_registered_and_built_once(
    example: Path, root: Path, instance: dg.DagsterInstance
) -> None:
    inbox = root / "inbox"
    inbox.mkdir(parents=True)
    assert isinstance(_tick(instance, root, None), dg.SkipReason)

    shutil.copytree(example.parent / "tiny", inbox / "tiny")
    shutil.copy(example, inbox / "tiny.toml")
    shutil.copy(variant(example, "same"), inbox / "same-config-as-json.json")
    (inbox / "broken.toml").write_text('dataset = "x"\nversion = "v1"\n')  # no tokenizer

    result = _tick(instance, root, None)
    assert isinstance(result, dg.SensorResult)
    key = load_config(example).partition_key
    assert [r.run_key for r in result.run_requests or []] == [key, key], "same config: one run"
    assert all(r.partition_key == key for r in result.run_requests or [])
    (request,) = result.dynamic_partitions_requests or []
    assert isinstance(request, dg.AddDynamicPartitionsRequest)
    assert list(request.partition_keys) == [key]
    assert (root / "configs" / f"{key[-12:]}.json").is_file()
    assert load_config(root / "configs" / f"{key[-12:]}.json").resolve("tiny") == inbox / "tiny"

    instance.add_dynamic_partitions(CORPUS_CONFIGS, [key])  # what the daemon does with it
    again = _tick(instance, root, result.cursor)
    assert isinstance(again, dg.SkipReason), "unchanged files are not looked at again"


def _tick_with_cursor(
    instance: dg.DagsterInstance, root: Path, cursor: str | None
) -> tuple[object, str | None]:
    """One tick and the cursor it leaves (in its result, or set on the context by a skip)."""
    paths = CorpusPaths(root=str(root))
    with dg.build_sensor_context(
        instance=instance,
        cursor=cursor,
        resources={"paths": paths, "configs": ConfigStore(paths=paths)},
    ) as context:
        result = corpus_config_sensor(context)
        return result, getattr(result, "cursor", None) or context.cursor


HAND = {"version": "v1", "dataset": "tinystories", "tokenizer": {"id": "bytes"}}
SOURCE = {"name": "tiny", "kind": "jsonl", "path": "tiny/docs.jsonl", "license": "cc0-1.0"}
CANNOT_BUILD = {  # file name -> (config, what its log line must say)
    "hand.json": (HAND, "config has no sources"),
    "missing-tokenizer.json": (
        {**HAND, "tokenizer": {"id": "gpt2", "path": "gone/tokenizer.json"}, "sources": [SOURCE]},
        "file not found",
    ),
    "not-a-tokenizer.json": (
        {**HAND, "tokenizer": {"id": "x", "path": "junk.txt"}, "sources": [SOURCE]},
        "junk.txt is not a valid tokenizer.json",
    ),
    "secret-in-version.json": (
        {**HAND, "version": "Hunter2-SECRET", "sources": [SOURCE]},
        "version is not a path-safe name: it has uppercase letters",
    ),
    "matches-nothing.json": (
        {**HAND, "sources": [{**SOURCE, "path": "tiny/*.parquet"}]},
        "no files match 'tiny/*.parquet'",
    ),
}


def test_configs_that_cannot_build_are_logged_and_skipped(
    example: Path,
    root: Path,
    tmp_path: Path,
    instance: dg.DagsterInstance,
    capfd: pytest.CaptureFixture[str],
) -> None:
    inbox = root / "inbox"
    shutil.copytree(example.parent / "tiny", inbox / "tiny")
    (inbox / "junk.txt").write_text("not a tokenizer\n")
    for name, (raw, _) in CANNOT_BUILD.items():
        (inbox / name).write_text(json.dumps(raw))
    outside = tmp_path / "outside"  # a config that would build, linked in from elsewhere
    shutil.copytree(example.parent / "tiny", outside / "tiny")
    shutil.copy(variant(example, "linked"), outside / "linked.json")
    (inbox / "linked.json").symlink_to(outside / "linked.json")
    capfd.readouterr()
    result, cursor = _tick_with_cursor(instance, root, None)
    logged = capfd.readouterr().err.splitlines()  # the sensor's log lines (dagster's handler)
    assert isinstance(result, dg.SkipReason), result
    assert not (root / "configs").exists(), "a config that cannot build was registered"
    assert instance.get_dynamic_partitions(CORPUS_CONFIGS) == []
    for name, (_, says) in {**CANNOT_BUILD, "linked.json": (None, "link out of the inbox")}.items():
        (line,) = [m for m in logged if f"WARNING - {inbox / name}: not registered: " in m]
        assert says in line, logged
    assert not [m for m in logged if "Hunter2" in m], (
        "a config value that may be a secret was logged"
    )
    assert cursor is not None and set(json.loads(cursor)) == {*CANNOT_BUILD, "linked.json"}, (
        "not looked at again"
    )

    shutil.copy(example, inbox / "tiny.toml")  # a good config beside them is registered
    good, _ = _tick_with_cursor(instance, root, cursor)
    assert isinstance(good, dg.SensorResult)
    key = load_config(example).partition_key
    assert [r.partition_key for r in good.run_requests or []] == [key]
    assert sorted(p.name for p in (root / "configs").iterdir()) == [
        f"{key[-12:]}.json",
        f"{key[-12:]}.origin.json",
    ]


TICK = """
import json, sys
from pathlib import Path
import dagster as dg
from corpus_assets.resources.configs import ConfigStore
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.sensors.config import corpus_config_sensor

paths = CorpusPaths(root=sys.argv[1])
with dg.DagsterInstance.ephemeral() as instance, dg.build_sensor_context(
    instance=instance, resources={"paths": paths, "configs": ConfigStore(paths=paths)}
) as context:
    result = corpus_config_sensor(context)
    cursor = getattr(result, "cursor", None) or context.cursor
    print(json.dumps({"skip": isinstance(result, dg.SkipReason), "cursor": cursor}))
"""


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_hub_that_cannot_be_reached_is_tried_again_next_tick(root: Path, tmp_path: Path) -> None:
    """Online, but the hub endpoint refuses connections (a closed local port, no network): the
    config is logged as transient and left out of the cursor, so the next tick looks at it again
    (a config error is recorded in the cursor: see the test above). One tick: the hub client's
    own retries take about 25 s."""
    inbox = root / "inbox"
    inbox.mkdir(parents=True)
    (inbox / "docs.jsonl").write_text('{"text": "a document"}\n')
    source = {**SOURCE, "path": "docs.jsonl"}
    hub = {**HAND, "tokenizer": {"id": "test-org/some-tokenizer"}, "sources": [source]}
    (inbox / "hub.json").write_text(json.dumps(hub))
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "0",
        "HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}",
        "HF_HOME": str(tmp_path / "hf-home"),
    }
    done = subprocess.run(
        [sys.executable, "-c", TICK, str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"skip": True, "cursor": "{}"}, "it would not be retried"
    (warning,) = [line for line in done.stderr.splitlines() if "not registered" in line]
    assert f"{inbox / 'hub.json'}: not registered: " in warning
    assert "'test-org/some-tokenizer': cannot reach the Hugging Face Hub" in warning
    assert not (root / "configs").exists()


def test_a_dropped_mixture_config_is_registered_and_its_index_built_once(
    root: Path, instance: dg.DagsterInstance
) -> None:
    """A mixture config in the inbox becomes a mixture_configs partition and one mixture_build
    run; its components need not be built yet (the run says so if they are not)."""
    inbox = root / "inbox"
    inbox.mkdir(parents=True)
    shutil.copy(REPO / "examples" / "mixture" / "stories-plays.toml", inbox / "mix.toml")
    key = load_mixture_config(inbox / "mix.toml").partition_key

    result = _tick(instance, root, None)

    assert isinstance(result, dg.SensorResult)
    (run,) = result.run_requests or []
    assert (run.job_name, run.partition_key, run.run_key) == ("mixture_build", key, key)
    (request,) = result.dynamic_partitions_requests or []
    assert isinstance(request, dg.AddDynamicPartitionsRequest)
    assert (request.partitions_def_name, list(request.partition_keys)) == (MIXTURE_CONFIGS, [key])
    assert (root / "mixture-configs" / f"{key[-12:]}.json").is_file()
