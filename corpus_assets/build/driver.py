"""`corpus register`, `corpus build` and `corpus ui`: the Dagster side of the `corpus` command.

Imported only by those commands (it imports Dagster, ~0.75 s); `corpus run` never loads it.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import dagster as dg

from corpus_assets.assets import checks
from corpus_assets.assets.task_checks import TASK_CHECK_NAMES
from corpus_assets.build.cleanup import compensating
from corpus_assets.build.output import QUIET_LOGS, BuildOutput, error_message
from corpus_assets.core.config import LoadedConfig
from corpus_assets.core.errors import EXIT_DATA, EXIT_TRANSIENT, EXIT_USAGE, ConfigError
from corpus_assets.core.store import registry
from corpus_assets.core.store.atomic import MANIFEST
from corpus_assets.core.store.layout import Layout
from corpus_assets.definitions import build_defs
from corpus_assets.instance.dead_runs import mark_dead_runs, process_tags
from corpus_assets.instance.home import deaf_log_watchers, open_instance, seed_retry_cursors
from corpus_assets.instance.partitions import add_partition
from corpus_assets.instance.postgres import open_postgres_instance
from corpus_assets.jobs import BUILD_JOB, RECHECK_JOB, TASK_JOB
from corpus_assets.resources.partitions import CORPUS_CONFIGS, TASK_CONFIGS
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.resources.stage_runner import StageRunner
from corpus_assets.tasks import registry as registry_tasks

Emit = Callable[[str], None]
STAGE_ASSETS = {"raw": "fetch", "shards": "shard", "tokens": "tokenize"}
ROW_COUNT = "dagster/row_count"
"""The metadata key of a stage asset's documents (fetched for raw, kept for shards)."""


@dataclass(frozen=True)
class BuildResult:
    """What `corpus build` prints (stable across identical builds) and its exit code."""

    summary: dict[str, Any]
    exit_code: int
    run_id: str


def register(config_file: Path, root: Path, instance: dg.DagsterInstance) -> LoadedConfig:
    """Store the config under the data root and add its partition to the instance."""
    registered = registry.register(config_file, Layout(root.resolve()))
    cfg = registered.config
    add_partition(instance, CORPUS_CONFIGS, cfg.partition_key)
    return cfg


def register_summary(cfg: LoadedConfig, root: Path, instance: dg.DagsterInstance) -> dict[str, Any]:
    layout = Layout(root.resolve())
    return {
        "partition_key": cfg.partition_key,
        "build_id": cfg.build_id,
        "config_sha256": cfg.sha256,
        "config": str(layout.config_file(cfg).relative_to(layout.root)),
        "root": str(layout.root),
        "dagster_home": instance.root_directory,
    }


def build(
    config_file: Path,
    root: Path,
    instance: dg.DagsterInstance,
    stage_runner: StageRunner | None = None,
    emit: Emit | None = None,
    verbose: bool = False,
    progress: bool | None = None,
    compensate: bool = True,
) -> BuildResult:
    """Register `config_file` and materialize raw, shards and tokens (with checks) in-process.

    Stage progress goes to stderr when `progress` (default: when stderr is a terminal); Dagster's
    own log only when `verbose`; the whole run log always to `<root>/logs/<run_id>.log`. A run
    that fails for good or is interrupted after its shard stage started is cleaned up here, as
    the sensors would (`compensate=False` leaves that to them); an interrupt then raises
    `BuildInterrupted`.
    """
    output = BuildOutput(emit or _stderr, verbose=verbose, live=progress)
    mark_dead_runs(instance, by="corpus build", say=lambda line: output.say(f"[corpus] {line}"))
    root = root.resolve()
    cfg = register(config_file, root, instance)
    output.note(f"[corpus] building partition {cfg.partition_key} ({cfg.build_id}) under {root}")
    defs = build_defs(paths=CorpusPaths(root=str(root)), stage_runner=stage_runner)
    job = defs.resolve_job_def(BUILD_JOB)
    start = time.monotonic()
    cleanup_lines: list[str] = []  # said after the capture, which would swallow them
    result: dg.ExecuteInProcessResult | None = None
    try:
        with (
            output.capture(),
            compensating(
                instance, defs, cleanup_lines.append, output.run_config, enabled=compensate
            ) as claim,
        ):
            result = job.execute_in_process(
                instance=instance,
                partition_key=cfg.partition_key,
                raise_on_error=False,
                run_config=output.run_config,
                tags={**process_tags(), **claim.tags},
            )
    finally:
        if result is not None:
            output.finish(instance, result, root, time.monotonic() - start)
        for line in cleanup_lines:
            output.say(line)
    assert result is not None  # the run returned (an interrupt raised above)
    summary = _summary(cfg, root, result)
    return BuildResult(summary=summary, exit_code=_exit_code(result), run_id=result.run_id)


def register_task(
    config_file: Path, root: Path, instance: dg.DagsterInstance
) -> registry_tasks.RegisteredJob:
    """Store a task-job config under the data root and add its `task_configs` partition."""
    registered = registry_tasks.register_job(config_file, root.resolve())
    add_partition(instance, TASK_CONFIGS, registered.config.partition_key)
    return registered


def register_task_summary(
    registered: registry_tasks.RegisteredJob, root: Path, instance: dg.DagsterInstance
) -> dict[str, Any]:
    config = registered.config
    return {
        "kind": "task",
        "partition_key": config.partition_key,
        "config_sha256": config.sha256,
        "config": str(registered.path.relative_to(root.resolve())),
        "job_folder": str(registry_tasks.job_folder(root.resolve(), config)),
        "root": str(root.resolve()),
        "dagster_home": instance.root_directory,
    }


def build_task(
    config_file: Path,
    root: Path,
    instance: dg.DagsterInstance,
    stage_runner: StageRunner | None = None,
    emit: Emit | None = None,
    verbose: bool = False,
    progress: bool | None = None,
) -> BuildResult:
    """Register a task-job config and materialize `task_dataset` (with its checks) in-process.

    A failed or interrupted run keeps the job folder: building again resumes it.
    """
    output = BuildOutput(emit or _stderr, verbose=verbose, live=progress)
    mark_dead_runs(instance, by="corpus build", say=lambda line: output.say(f"[corpus] {line}"))
    root = root.resolve()
    registered = register_task(config_file, root, instance)
    config = registered.config
    folder = registry_tasks.job_folder(root, config)
    output.note(f"[corpus] building task partition {config.partition_key} in {folder}")
    defs = build_defs(paths=CorpusPaths(root=str(root)), stage_runner=stage_runner)
    start = time.monotonic()
    result: dg.ExecuteInProcessResult | None = None
    try:
        # no cleanup (the job folder is kept for a resume), but Ctrl-C/SIGTERM end in 130/143
        with (
            output.capture(),
            compensating(instance, defs, output.say, output.run_config, enabled=False) as claim,
        ):
            result = defs.resolve_job_def(TASK_JOB).execute_in_process(
                instance=instance,
                partition_key=config.partition_key,
                raise_on_error=False,
                run_config=output.run_config,
                tags={**process_tags(), **claim.tags},
            )
    finally:
        if result is not None:
            output.finish(instance, result, root, time.monotonic() - start)
    meta = _metadata(result, "task_dataset")
    summary: dict[str, Any] = {
        "success": result.success,
        "kind": "task",
        "partition_key": config.partition_key,
        "config_sha256": config.sha256,
        "root": str(root),
        "job_folder": str(folder),
        "dataset_id": meta.get("dataset_id"),
        "dataset_path": meta.get("dataset_path"),
        "stages": {"tasks": _step_status(result, "task_dataset")},
        "checks": _check_outcomes(result, TASK_CHECK_NAMES),
    }
    error = _first_error(result)
    if error:
        summary["error"] = error
    return BuildResult(summary=summary, exit_code=_exit_code(result), run_id=result.run_id)


def _summary(cfg: LoadedConfig, root: Path, result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    layout = Layout(root)
    meta = {name: _metadata(result, name) for name in STAGE_ASSETS}
    out: dict[str, Any] = {
        "success": result.success,
        "partition_key": cfg.partition_key,
        "build_id": cfg.build_id,
        "config_sha256": cfg.sha256,
        "root": str(root),
        "shards_manifest": _rel(layout.shards(cfg) / MANIFEST, root),
        "tokens_manifest": _rel(layout.tokens(cfg) / MANIFEST, root),
        "report": _report_of(result, root),
        "documents": {
            "fetched": meta["raw"].get(ROW_COUNT),
            "in": meta["shards"].get("documents_in"),
            "out": meta["shards"].get(ROW_COUNT),
        },
        "tokens": meta["tokens"].get("tokens"),
        "stages": {STAGE_ASSETS[name]: _step_status(result, name) for name in STAGE_ASSETS},
        "checks": _check_outcomes(result),
    }
    error = _first_error(result)
    if error:
        out["error"] = error
    return out


def _report_of(result: dg.ExecuteInProcessResult, root: Path) -> str | None:
    """REPORT.md relative to the root, when this run's report step wrote (or reused) it."""
    path = _metadata(result, "report").get("report_path")
    return _rel(Path(path), root) if isinstance(path, str) else None


def _metadata(result: dg.ExecuteInProcessResult, node: str) -> dict[str, Any]:
    events = result.asset_materializations_for_node(node)
    if not events:
        return {}
    return {k: v.value for k, v in events[-1].metadata.items()}


def _rel(path: Path, root: Path) -> str | None:
    return str(path.relative_to(root)) if path.is_file() else None


def _step_status(result: dg.ExecuteInProcessResult, node: str) -> str:
    if result.is_node_success(node):
        return "materialized"
    if result.is_node_failed(node):
        return "failed"
    return "skipped"


def _check_outcomes(
    result: dg.ExecuteInProcessResult, names: tuple[str, ...] = checks.CHECK_NAMES
) -> dict[str, str]:
    outcomes = {name: "not run" for name in names}
    for evaluation in result.get_asset_check_evaluations():
        outcomes[evaluation.check_name] = "passed" if evaluation.passed else "failed"
    return dict(sorted(outcomes.items()))


def _failures(result: dg.ExecuteInProcessResult) -> list[dg.DagsterEvent]:
    return [e for e in result.all_events if e.is_step_failure]


def _first_error(result: dg.ExecuteInProcessResult) -> str | None:
    for event in _failures(result):
        data = event.step_failure_data
        if data.user_failure_data is not None and data.user_failure_data.description:
            return f"{event.step_key}: {data.user_failure_data.description}"
        if data.error is not None:
            return f"{event.step_key}: {error_message(data.error)}"
    return None if result.success else "the run failed"


def _exit_code(result: dg.ExecuteInProcessResult) -> int:
    """0; the failed stage's own 64/65/75; 65 for a failed blocking check; else 1."""
    if result.success:
        return 0
    for event in _failures(result):
        data = event.step_failure_data
        if data.user_failure_data is not None:
            code = data.user_failure_data.metadata.get("exit_code")
            if code is not None and code.value in (EXIT_USAGE, EXIT_DATA, EXIT_TRANSIENT):
                return int(code.value)
        if data.error is not None and data.error.cls_name == "DagsterAssetCheckFailedError":
            return EXIT_DATA
    return 1


def recheck(instance: dg.DagsterInstance, root: Path, partition_key: str) -> dict[str, str]:
    """Run the `corpus_recheck` job of a partition in process; per check its outcome."""
    registry.path_for(Layout(root.resolve()), partition_key)  # ConfigError if unregistered
    add_partition(instance, CORPUS_CONFIGS, partition_key)  # registered: a no-op
    defs = build_defs(paths=CorpusPaths(root=str(root.resolve())))
    result = defs.resolve_job_def(RECHECK_JOB).execute_in_process(
        instance=instance,
        partition_key=partition_key,
        run_config=QUIET_LOGS,
        raise_on_error=False,
        tags=process_tags(),
    )
    outcomes = dict.fromkeys(checks.CHECK_NAMES, "not materialized")
    records = instance.get_records_for_run(
        result.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
    ).records
    for record in records:
        event = record.event_log_entry.dagster_event
        evaluation = event.event_specific_data if event is not None else None
        if isinstance(evaluation, dg.AssetCheckEvaluation):
            outcomes[evaluation.check_name] = "passed" if evaluation.passed else "failed"
    failures = [e.step_failure_data for e in result.get_step_failure_events()]
    if failures and not records:  # refused (no build) before anything was checked: its line
        refusal = failures[0].user_failure_data
        why = refusal.description if refusal is not None else None
        raise ConfigError(str(why or error_message(failures[0].error)))
    return dict(sorted(outcomes.items()))


SUPERSEDED = "Function `dev_command` is superseded"
SERVICES_LOG_LEVEL = "warning"
"""What `dagster dev`'s webserver and daemon print: warnings and errors. At info the daemon prints
two lines per sensor tick (four sensors, every 5 to 10 s) that the UI's sensor pages show."""


def ui(root: Path, host: str, port: int, url: str | None = None) -> NoReturn:
    """Replace this process with `dagster dev` on the data root's instance (or `url`'s)."""
    with instance_for(root, url) as instance:  # checks a URL, creates the tables once
        home = Path(instance.root_directory)
        seed_retry_cursors(instance)  # the daemon starts now
    env = {**os.environ, "DAGSTER_HOME": str(home), "CORPUS_ROOT": str(root.resolve())}
    # `dagster dev` warns at start-up that `dg dev` supersedes it; `corpus ui` is the command here
    quiet = f"ignore:{SUPERSEDED}:FutureWarning"
    env["PYTHONWARNINGS"] = ",".join(filter(None, (os.environ.get("PYTHONWARNINGS"), quiet)))
    argv = [sys.executable, "-m", "dagster", "dev", "-m", "corpus_assets.definitions"]
    argv += ["-h", host, "-p", str(port), "--log-level", SERVICES_LOG_LEVEL]
    _stderr(f"[corpus] DAGSTER_HOME={home} CORPUS_ROOT={env['CORPUS_ROOT']}")
    _stderr(f"[corpus] UI on http://{host}:{port} (Ctrl-C stops it)")
    for sig in (signal.SIGINT, signal.SIGTERM):  # dagster dev ignores them if inherited ignored
        signal.signal(sig, signal.SIG_DFL)
    os.execvpe(argv[0], argv, env)


def instance_for(root: Path, url: str | None = None) -> dg.DagsterInstance:
    """The data root's instance (DAGSTER_HOME, else `<root>/dagster`), or with a PostgreSQL
    `url` the one whose storage is there (home `<root>/dagster-postgres`). The helper processes
    of its runs' log capture leave a Ctrl-C to this process (`deaf_log_watchers`)."""
    if url is None:
        return deaf_log_watchers(open_instance(root))
    return deaf_log_watchers(open_postgres_instance(root, url))


def _stderr(line: str) -> None:
    if sys.stderr is None:  # started with fd 2 closed: nowhere to say it
        return
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
