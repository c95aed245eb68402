"""Helpers of the fault tests: instance queries, tree digests, sensors, cancelling a build."""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
from pathlib import Path

import dagster as dg
from support.corpus import own_instance_env, start_corpus

from corpus_assets.definitions import build_defs
from corpus_assets.jobs import CLEANUP_JOB
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.sensors.cleanup import corpus_cleanup_on_cancel, corpus_cleanup_on_failure


def tree(root: Path, *parts: str) -> dict[str, str]:
    """sha256 of every file under `root/part` for each part, keyed by path relative to `root`."""
    out: dict[str, str] = {}
    for part in parts:
        for path in sorted((root / part).rglob("*")):
            if path.is_file():
                out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def materializations(instance: dg.DagsterInstance, asset: str, key: str) -> list[dg.EventLogRecord]:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[key]), limit=100
    )
    return list(records.records)


def runs_of(
    instance: dg.DagsterInstance, job: str, tag: str | None = None, value: str = ""
) -> list[dg.DagsterRun]:
    """Runs of `job`, oldest first; with `tag`, only those whose tag has `value`."""
    tags = {tag: value} if tag else None
    return list(reversed(instance.get_runs(filters=dg.RunsFilter(job_name=job, tags=tags))))


def step_events(instance: dg.DagsterInstance, run_id: str, step: str) -> list[str]:
    return [
        r.event_log_entry.dagster_event_type.value  # type: ignore[union-attr]
        for r in instance.get_records_for_run(run_id).records
        if r.event_log_entry.step_key == step and r.event_log_entry.is_dagster_event
    ]


def messages(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [r.event_log_entry.user_message for r in instance.get_records_for_run(run_id).records]


def sensor_requests(
    instance: dg.DagsterInstance, run_id: str
) -> list[dg.RunRequest | dg.SkipReason]:
    """What both cleanup sensors answer for a finished run (each sees only its own outcome)."""
    run = instance.get_run_by_id(run_id)
    assert run is not None
    answers: list[dg.RunRequest | dg.SkipReason] = []
    for sensor, kind in (
        (corpus_cleanup_on_failure, dg.DagsterEventType.RUN_FAILURE),
        (corpus_cleanup_on_cancel, dg.DagsterEventType.RUN_CANCELED),
    ):
        records = instance.get_records_for_run(run_id, of_type=kind).records
        if not records:
            continue
        event = records[-1].event_log_entry.dagster_event
        assert event is not None
        context = dg.build_run_status_sensor_context(
            sensor_name=sensor.name, dagster_event=event, dagster_instance=instance, dagster_run=run
        )
        if kind == dg.DagsterEventType.RUN_FAILURE:
            answer = sensor(context.for_run_failure())
        else:
            answer = sensor(context)
        assert isinstance(answer, dg.RunRequest | dg.SkipReason)
        answers.append(answer)
    return answers


def launch_cleanups(
    requests: list[dg.RunRequest | dg.SkipReason], root: Path, instance: dg.DagsterInstance
) -> None:
    """Run each requested cleanup once per run key, as the daemon would."""
    job = build_defs(paths=CorpusPaths(root=str(root))).resolve_job_def(CLEANUP_JOB)
    done = {r.tags.get("dagster/run_key") for r in runs_of(instance, CLEANUP_JOB)}
    for request in requests:
        if isinstance(request, dg.SkipReason) or request.run_key in done:
            continue
        done.add(request.run_key)
        result = job.execute_in_process(
            run_config=request.run_config,
            instance=instance,
            tags={**request.tags, "dagster/run_key": str(request.run_key)},
        )
        assert result.success


SYLLABLES = ("ka", "lo", "mi", "ren", "to", "sa", "vel", "ni", "dor", "ae", "bru", "fen", "qui")
EOS = "<|endoftext|>"


def words(seed: int, count: int) -> list[str]:
    """`count` distinct made-up words of two to four syllables."""
    rng = random.Random(seed)
    out: set[str] = set()
    while len(out) < count:
        out.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(out)


def write_corpus(path: Path, docs: int, seed: int = 0) -> Path:
    """`docs` unique documents of about 1 KB of made-up sentences, as jsonl (`id`, `text`)."""
    rng = random.Random(seed)
    vocab = words(seed, 3000)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        for i in range(docs):
            sentences = [
                " ".join(rng.choice(vocab) for _ in range(rng.randint(6, 14))).capitalize() + "."
                for _ in range(14)
            ]
            out.write(json.dumps({"id": f"doc-{seed}-{i}", "text": " ".join(sentences)}) + "\n")
    return path


def write_tokenizer(path: Path, seed: int = 0) -> Path:
    """A real `tokenizers` word-level tokenizer.json over the corpus's words, EOS included."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(["[UNK]", EOS, *words(seed, 3000)])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return path


def corpus_config(folder: Path, name: str, docs: int, tokenizer: bool = False) -> Path:
    """A config over a generated corpus of `docs` documents: one shard task per 1,024 of them."""
    data = write_corpus(folder / f"{name}.jsonl", docs)
    spec: dict[str, object] = {
        "dataset": name,
        "version": "v1",
        "tokenizer": {"id": "bytes"},
        "sources": [{"name": name, "kind": "jsonl", "path": data.name, "license": "cc0-1.0"}],
        "dedup": {"near": False},
        "shards": {"target_mb": 1},
    }
    if tokenizer:
        spec["tokenizer"] = {"id": "words", "path": write_tokenizer(folder / "tok.json").name}
    config = folder / f"{name}.json"
    config.write_text(json.dumps(spec, indent=2), encoding="utf-8")
    return config


def start_build(config: Path, root: Path) -> subprocess.Popen[str]:
    """`corpus build --progress CONFIG --root ROOT` (the stages' progress lines on its stderr)
    on the root's own instance, stdout and stderr piped."""
    env = own_instance_env()
    return start_corpus(
        "build", "--progress", config, "--root", root,
        environ=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def staged(root: Path, hash12: str, stage: str) -> list[str]:
    """Finished task outputs of `stage` in its staging folder: the shard stage's `.done` task
    markers, the tokenize stage's per-shard markers (each written after its files)."""
    work = root / "work" / hash12 / stage
    pattern = "tasks/task-*.done" if stage == "shard" else "markers/*.json"
    return sorted(str(p.relative_to(root)) for p in work.glob(pattern))
