"""The `corpus` command. Only this module prints and maps errors to exit codes.

Stage commands import no Dagster (they start fast); `build`, `register` and `ui` import it lazily.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from corpus_assets.core.errors import EXIT_OK, EXIT_USAGE, CorpusError
from corpus_assets.core.secrets import mask_text

STAGE_NAMES = ("fetch", "shard", "tokenize")


def _emit(line: str) -> None:
    print(mask_text(line), file=sys.stderr, flush=True)


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False), flush=True)


def _root(args: argparse.Namespace) -> Path:
    """--root, else `default_root()`: a writable folder, or one we can make."""
    from corpus_assets.core.store.layout import check_root, default_root

    return check_root(Path(args.root) if args.root else default_root())


def cmd_hash(args: argparse.Namespace) -> int:
    from corpus_assets.core.config import STAGES, load_config

    cfg = load_config(args.file)
    info = {
        "canonical": cfg.masked.decode("utf-8"),
        "sha256": cfg.sha256,
        "build_id": cfg.build_id,
        "partition_key": cfg.partition_key,
        "stage_keys": {s: cfg.stage_key(s) for s in STAGES},
    }
    if args.json:
        _print_json(info)
    else:
        print(f"canonical      {info['canonical']}")
        print(f"sha256         {info['sha256']}")
        print(f"build id       {info['build_id']}")
        print(f"partition key  {info['partition_key']}")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from corpus_assets.core.stages.run import run_stage
    from corpus_assets.resources.stage_report import pipes_if_launched

    with pipes_if_launched() as pipes:  # open first: a refusal below reaches the runner too
        if args.workers is not None and args.workers < 1:
            raise _usage(f"--workers must be at least 1, got {args.workers}")
        backend = _backend(args)
        root = _root(args)
        emit = _emit if pipes is None else pipes.tee(_emit)
        result = run_stage(
            args.stage,
            Path(args.config),
            root,
            workers=args.workers,
            emit=emit,
            backend=backend,
            refresh=args.refresh,
        )
        if pipes is not None:
            from corpus_assets.core.config import load_config

            config = json.loads(load_config(args.config).masked)
            pipes.materialized(result, root.resolve(), config)
    _print_json(result)
    return EXIT_OK


def _backend(args: argparse.Namespace) -> Any:
    """--backend, --ray-address and --ray-shared-root, checked (the core's Backend)."""
    from corpus_assets.core.stages.backend import Backend

    return Backend(args.backend, args.ray_address, args.ray_shared_root == "yes")


def cmd_cleanup(args: argparse.Namespace) -> int:
    from corpus_assets.core.stages.run import run_cleanup
    from corpus_assets.resources.stage_report import pipes_if_launched

    with pipes_if_launched() as pipes:
        emit = _emit if pipes is None else pipes.tee(_emit)
        result = run_cleanup(Path(args.config), _root(args), emit, args.keep_newer_than)
        removed = ", ".join(result["removed"]) or "nothing"
        emit(f"cleanup: {result.get('kept') or 'removed ' + removed}")
    _print_json(result)
    return EXIT_OK


def _checked_config(file: str, root: Path | None = None) -> None:
    """Load and pre-flight a config: a bad one fails before Dagster or an instance (with the
    data `root`, also a classifier it names that is not trained there)."""
    from corpus_assets.core.config import load_config
    from corpus_assets.core.stages.preflight import preflight
    from corpus_assets.core.store.layout import Layout

    preflight(load_config(file), Layout(root) if root is not None else None)


def _task_config(args: argparse.Namespace) -> bool:
    """Whether FILE is a task-job config (its `recipe` key); then it is validated whole."""
    from corpus_assets.core.store.layout import default_root
    from corpus_assets.tasks import registry
    from corpus_assets.tasks.config import load_job_config

    if not registry.is_task_config(Path(args.file)):
        return False
    root = (Path(args.root) if args.root else default_root()).resolve()
    registry.check_buildable(load_job_config(args.file), root)
    return True


def cmd_register(args: argparse.Namespace) -> int:
    from corpus_assets.core.store.classifier_registry import is_classifier_config
    from corpus_assets.core.store.mixture_registry import is_mixture_config

    if is_mixture_config(Path(args.file)):
        from corpus_assets.build import driver
        from corpus_assets.resources.mixture_configs import register_mixture

        root = _root(args)
        instance = driver.instance_for(root, _instance_url(args))
        _print_json(register_mixture(Path(args.file), root, instance))
        return EXIT_OK
    if is_classifier_config(Path(args.file)):
        from corpus_assets.build import driver
        from corpus_assets.resources.classifier_configs import register_classifier

        root = _root(args)
        instance = driver.instance_for(root, _instance_url(args))
        _print_json(register_classifier(Path(args.file), root, instance))
        return EXIT_OK
    if _task_config(args):
        from corpus_assets.build import driver

        root = _root(args)
        instance = driver.instance_for(root, _instance_url(args))
        registered = driver.register_task(Path(args.file), root, instance)
        _print_json(driver.register_task_summary(registered, root, instance))
        return EXIT_OK
    _checked_config(args.file)
    from corpus_assets.build import driver

    root = _root(args)
    instance = driver.instance_for(root, _instance_url(args))
    cfg = driver.register(Path(args.file), root, instance)
    _print_json(driver.register_summary(cfg, root, instance))
    return EXIT_OK


def cmd_build(args: argparse.Namespace) -> int:
    task = _task_config(args)
    if not task:
        _checked_config(args.file, _root(args))
    from corpus_assets.build import driver
    from corpus_assets.resources.stage_runner import StageRunner

    backend = _backend(args)
    root = _root(args)
    settings: dict[str, Any] = {"workers": args.workers} if args.workers else {}
    if args.refresh:
        settings["refresh"] = True
    if backend.is_ray:
        settings.update(
            backend="ray", ray_address=backend.ray_address, ray_shared_root=backend.shared_root
        )
    runner = StageRunner(**settings) if settings else None
    if args.publish:  # a URL that cannot be published to fails before the build
        from corpus_assets.core.stages.publish import check_destination

        check_destination(args.publish)
    run = driver.build_task if task else driver.build
    result = run(
        Path(args.file),
        root,
        driver.instance_for(root, _instance_url(args)),
        runner,
        verbose=args.verbose,
        progress=args.progress or None,
    )
    if args.publish and result.exit_code == EXIT_OK:
        from corpus_assets.core.errors import CorpusError

        try:
            result.summary["published"] = _publish_build(
                result.summary, root.resolve(), args.publish
            )
        except CorpusError as exc:  # the build stands: say so, then fail as the publish did
            result.summary["published"] = {"error": str(exc)}
            _print_json(result.summary)
            raise
    _print_json(result.summary)
    return result.exit_code


def cmd_check(args: argparse.Namespace) -> int:
    """`corpus check CONFIG|PARTITION`: the build's checks again, reported to the instance."""
    from corpus_assets.build import driver
    from corpus_assets.core.config import load_config

    root = _root(args)
    target = Path(args.target)
    key = load_config(target).partition_key if target.is_file() else args.target
    with driver.instance_for(root, _instance_url(args)) as instance:
        outcomes = driver.recheck(instance, root, key)
    _print_json({"partition_key": key, "checks": outcomes})
    failed = [name for name, outcome in outcomes.items() if outcome == "failed"]
    if failed:
        from corpus_assets.core.errors import DataError

        raise DataError(f"checks failed on {key}: {', '.join(failed)}")
    return EXIT_OK


def cmd_forget(args: argparse.Namespace) -> int:
    """`corpus forget KEY [--data]`: the partition out of the instance (with --data, its build's
    files too); one JSON line."""
    from corpus_assets.build import driver
    from corpus_assets.instance.forget import forget

    root = _root(args)
    with driver.instance_for(root, _instance_url(args)) as instance:
        forgotten = forget(instance, root, args.key, data=args.data)
    print(json.dumps(forgotten.summary(), sort_keys=True), flush=True)
    return EXIT_OK


def cmd_classifier_train(args: argparse.Namespace) -> int:
    """`corpus classifier train CONFIG`: train and publish a quality classifier (a published
    one of the same config is kept)."""
    from corpus_assets.core.classifier_config import load_classifier_config
    from corpus_assets.core.stages.classifier import train
    from corpus_assets.core.store.layout import Layout
    from corpus_assets.core.store.progress import Progress
    from corpus_assets.resources.stage_report import pipes_if_launched

    with pipes_if_launched() as pipes:  # open first: a refusal below reaches the runner too
        cfg = load_classifier_config(args.config)  # a bad config fails before the data root
        root = _root(args)
        emit = _emit if pipes is None else pipes.tee(_emit)
        result = train(cfg, Layout(root.resolve()), Progress("classifier", emit), args.refresh)
    m = result.manifest
    v = m["validation"]
    summary = {
        "partition_key": result.partition_key,
        "folder": str(result.folder),
        "model_sha256": result.model_sha256,
        "already_trained": result.cached,
        "labels": m["labels"],
        "positive_label": m["positive_label"],
        "examples": {c: m["examples"][c] for c in ("positive", "negative")},
        "validation": {k: v[k] for k in ("threshold", "precision", "recall", "roc_auc")},
    }
    if args.json:
        _print_json(summary)
        return EXIT_OK
    counts = ", ".join(
        f"{c} {n['train']:,} train / {n['validation']:,} validation"
        for c, n in summary["examples"].items()
    )
    scores = ", ".join(
        f"{k} {'n/a' if v[k] is None else f'{v[k]:.4f}'}"
        for k in ("precision", "recall", "roc_auc")
    )
    print(f"partition key  {result.partition_key}{' (already trained)' if result.cached else ''}")
    print(f"model          {result.folder / m['model']['name']}")
    print(f"model sha256   {result.model_sha256}")
    print(f"examples       {counts}")
    print(f"validation     {scores} (at {v['threshold']})")
    return EXIT_OK


def cmd_mix(args: argparse.Namespace) -> int:
    """`corpus mix CONFIG`: build and publish a mixture's sample index (a built one is kept)."""
    import os

    from corpus_assets.core.mixture_config import load_mixture_config
    from corpus_assets.core.stages.mixture import mix
    from corpus_assets.core.store.layout import Layout
    from corpus_assets.core.store.progress import Progress
    from corpus_assets.resources.stage_report import pipes_if_launched

    if args.workers is not None and args.workers < 1:
        raise _usage(f"--workers must be at least 1, got {args.workers}")
    cfg = load_mixture_config(args.config)  # a bad config fails before the data root
    root = _root(args)
    with pipes_if_launched() as pipes:
        emit = _emit if pipes is None else pipes.tee(_emit)
        workers = args.workers or os.cpu_count() or 1
        result = mix(cfg, Layout(root.resolve()), workers, Progress("mix", emit))
    m = result.manifest
    _print_json(
        {
            "partition_key": result.partition_key,
            "folder": str(result.folder),
            "already_built": result.cached,
            "train": m["train"],
            "validation": m["validation"],
            "components": {
                c["name"]: {k: c[k] for k in ("samples", "share", "asked", "epochs")}
                for c in m["components"]
            },
        }
    )
    return EXIT_OK


def cmd_ui(args: argparse.Namespace) -> int:
    from corpus_assets.build import driver

    driver.ui(_root(args), args.host, args.port, _instance_url(args))


def _instance_url(args: argparse.Namespace) -> str | None:
    """--instance, else $CORPUS_DAGSTER_PG_URL, else None: SQLite under the data root."""
    from corpus_assets.instance.postgres import instance_url

    return instance_url(args.instance)


def cmd_verify(args: argparse.Namespace) -> int:
    from corpus_assets.core.stages.publish import verify_published
    from corpus_assets.core.stages.verify import verify_path

    if "://" in args.path:  # a published build: s3://, https://, or any fsspec URL
        problems = verify_published(args.path)
    elif _is_task_output(Path(args.path)):
        return _verify_task_snapshot(Path(args.path))
    else:
        problems = verify_path(Path(args.path))
    for problem in problems:
        print(f"{problem}", file=sys.stderr)
    if problems:
        from corpus_assets.core.errors import DataError

        raise DataError(f"{args.path}: {len(problems)} problem(s) found")
    print(f"ok: {args.path}")
    return EXIT_OK


def cmd_publish(args: argparse.Namespace) -> int:
    _print_json(_publish_verified(Path(args.path), args.url))
    return EXIT_OK


def _publish_verified(path: Path, url: str) -> dict[str, Any]:
    """Verify the build or snapshot at `path`, then publish it to `url` (DataError if it does
    not verify: nothing is uploaded)."""
    from corpus_assets.core.errors import DataError
    from corpus_assets.core.stages.publish import publish
    from corpus_assets.core.stages.verify import verify_path

    if _is_task_output(path):
        from corpus_assets.tasks.snapshot import load_snapshot

        path = Path(str(load_snapshot(path.parent if path.is_file() else path).path))
    else:
        problems = verify_path(path)
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            raise DataError(
                f"{path}: {len(problems)} problem(s) found; only a verified build is published"
            )
    return publish(path, url, _emit)


def _publish_build(summary: dict[str, Any], root: Path, url: str) -> dict[str, Any]:
    """`corpus build --publish URL`: the build's shards and tokens (or a task config's
    snapshot) under URL, each at its path under the data root, so a published token build
    finds its shards as on disk."""
    base = url.rstrip("/")
    out: dict[str, Any] = {}
    for kind, key in (("shards", "shards_manifest"), ("tokens", "tokens_manifest")):
        if summary.get(key):
            folder = (root / summary[key]).parent
            out[kind] = _publish_verified(folder, f"{base}/{folder.relative_to(root).as_posix()}")
    if summary.get("dataset_path"):
        folder = Path(summary["dataset_path"])
        where = folder.relative_to(root) if folder.is_relative_to(root) else Path(folder.name)
        out["tasks"] = _publish_verified(folder, f"{base}/{where.as_posix()}")
    return out


def _is_task_output(path: Path) -> bool:
    """A task snapshot, its `manifest.json`, or a data job's folder (not a corpus output)."""
    from corpus_assets.core.stages.verify import SOURCE_FILE
    from corpus_assets.core.store.atomic import MANIFEST
    from corpus_assets.tasks import snapshot

    if path.is_file():
        return path.name == snapshot.MANIFEST
    if not path.is_dir() or (path / MANIFEST).exists() or (path / SOURCE_FILE).exists():
        return False
    names = (snapshot.MANIFEST, *snapshot.DATA_FILES, "dataset", "job.json")
    return any((path / name).exists() for name in names)


def _verify_task_snapshot(path: Path) -> int:
    """`corpus verify` of a task snapshot: `load_snapshot`'s checks, one line either way."""
    from corpus_assets.core.errors import DataError
    from corpus_assets.tasks.snapshot import load_snapshot

    folder = path.parent if path.is_file() else path
    job_file = folder / "job.json"
    if job_file.is_file() and not (folder / "dataset").exists():
        state = "unreadable"
        with contextlib.suppress(OSError, ValueError, AttributeError):
            state = str(json.loads(job_file.read_text(encoding="utf-8")).get("state"))
        raise DataError(f"{folder}: a data job folder with no snapshot (job.json state: {state})")
    snapshot = load_snapshot(folder)
    print(
        f"ok: task snapshot {snapshot.path}: {snapshot.rows} rows, dataset_id {snapshot.dataset_id}"
    )
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from corpus_assets.core.stages.report import find_build, write_build_report

    path = Path(args.path)
    if not path.exists():
        raise _usage(f"{path}: no such file or folder")
    done = write_build_report(find_build(path))
    numbers = done.numbers
    tokens = numbers["tokens"]
    summary = {
        "build_id": numbers["build_id"],
        "report": str(done.report),
        "files": [str(f) for f in done.files],
        "documents_in": numbers["counts"]["documents_in"],
        "documents_out": numbers["counts"]["documents_out"],
        "dropped": sum(numbers["dropped"].values()),
        "duplicates": numbers["duplicates"],
        "pii": sum(numbers["pii"].values()),
        "tokens": None if tokens is None else tokens["tokens"],
    }
    print(json.dumps(summary, sort_keys=True, ensure_ascii=False), flush=True)
    return EXIT_OK


def cmd_tasks(args: argparse.Namespace) -> int:
    from corpus_assets.resources.stage_report import pipes_if_launched, task_metadata
    from corpus_assets.tasks.run import run_command

    with pipes_if_launched() as pipes:
        emit = _emit if pipes is None else pipes.tee(_emit)
        from corpus_assets.core.store.layout import default_root

        root = (Path(args.root) if args.root else default_root()).resolve()
        result = run_command(
            args.config, args.output, args.resume, args.export_hf, emit, root, args.attach
        )
        if pipes is not None:
            pipes.report(task_metadata(Path(result["dataset_path"])), result["dataset_id"])
    print(json.dumps(result, sort_keys=True, ensure_ascii=False), flush=True)
    return EXIT_OK


def cmd_export_hf(args: argparse.Namespace) -> int:
    from corpus_assets.core.stages.export_hf import refuse_existing, shards_manifest_of

    dest = refuse_existing(Path(args.dest))
    path = Path(args.path)
    if not path.exists():
        raise _usage(f"{path}: no such file or folder")
    manifest = shards_manifest_of(path)
    if manifest is not None:
        from corpus_assets.core.stages.export_hf import export_corpus

        done = export_corpus(manifest, dest, _emit)
        result = {"kind": "corpus_build", "rows": done.rows, "build_id": done.build_id}
    else:
        result = _export_snapshot(path, dest)
    result.update(source=str(path), dest=str(dest))
    print(json.dumps(result, sort_keys=True, ensure_ascii=False), flush=True)
    return EXIT_OK


def cmd_export_tokens(args: argparse.Namespace) -> int:
    """`corpus export-tokens BUILD --format F --to DEST`: one JSON object of what was written."""
    import dataclasses

    from corpus_assets.core.stages.export_tokens import export_tokens, tokens_manifest_of

    path: Path | str = args.path if "://" in args.path else Path(args.path)
    if isinstance(path, Path) and not path.exists():
        raise _usage(f"{path}: no such file or folder")
    done = export_tokens(tokens_manifest_of(path), args.format, args.to, _emit)
    _print_json(dataclasses.asdict(done))
    return EXIT_OK


def _export_snapshot(path: Path, dest: Path) -> dict[str, Any]:
    """`corpus export-hf` of a task snapshot: its training rows, by the task export."""
    from corpus_assets.tasks.export import EXPORT_SOURCE, export_hf_dataset, snapshot_folder_of

    folder = snapshot_folder_of(path)
    if folder is None:
        raise _usage(
            f"{path}: neither a corpus build's shards manifest (_MANIFEST.json of kind 'shards', "
            "or its folder) nor a task snapshot (a folder holding manifest.json)"
        )
    export_hf_dataset(folder, dest)
    source = json.loads((dest / EXPORT_SOURCE).read_text(encoding="utf-8"))
    return {"kind": "task_snapshot", "rows": source["rows"], "dataset_id": source["dataset_id"]}


def _usage(message: str) -> CorpusError:
    from corpus_assets.core.errors import ConfigError

    return ConfigError(message)


class _Parser(argparse.ArgumentParser):
    """argparse, but bad usage exits 64 (EX_USAGE) like every other usage error."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="corpus", description="Build reproducible language-model training corpora.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    h = sub.add_parser("hash", help="print a config's canonical form, sha256, build id, partition")
    h.add_argument("file", help="config file (.toml or .json)")
    h.add_argument("--json", action="store_true", help="print one JSON object for scripts")
    h.set_defaults(func=cmd_hash)

    r = sub.add_parser("run", help="run one stage of a build (fetch, shard or tokenize)")
    r.add_argument("--stage", required=True, choices=STAGE_NAMES)
    r.add_argument("--config", required=True, help="config file (.toml or .json)")
    _add_root(r)
    r.add_argument("--workers", type=int, default=None, help="worker processes (default: cores)")
    _add_backend(r)
    _add_refresh(r)
    r.set_defaults(func=cmd_run)

    c = sub.add_parser("cleanup", help="delete a build's shards, tokens and staging (never raw)")
    c.add_argument("--config", required=True, help="config file (.toml or .json)")
    _add_root(c)
    c.add_argument(
        "--keep-newer-than",
        type=float,
        default=None,
        metavar="UNIX_TIME",
        help="keep the build if one of its manifests was published after this instant (the "
        "sensors pass when they decided to clean up, so a newer build is never removed)",
    )
    c.set_defaults(func=cmd_cleanup)

    v = sub.add_parser(
        "verify", help="verify a manifest (or the folder holding it) and its files, or a snapshot"
    )
    v.add_argument(
        "path",
        help="a _MANIFEST.json / _SOURCE.json or its folder; a task snapshot (its manifest.json "
        "or folder) or the data job folder holding it; a published build's URL (s3://...)",
    )
    v.set_defaults(func=cmd_verify)
    pb = sub.add_parser(
        "publish",
        help="upload a verified shards or tokens build, or a task snapshot, to s3://... (data "
        "files first, read back, manifest last; a rerun uploads only what is missing or wrong)",
    )
    pb.add_argument(
        "path", help="a build's _MANIFEST.json or folder, or a task snapshot / job folder"
    )
    pb.add_argument("url", help="where: s3://BUCKET/PREFIX (or any fsspec URL)")
    pb.set_defaults(func=cmd_publish)
    rp = sub.add_parser(
        "report", help="write REPORT.md, plots and report.json beside a verified build's shards"
    )
    rp.add_argument("path", help="a shards or tokens _MANIFEST.json, or its folder")
    rp.set_defaults(func=cmd_report)
    _add_tasks_command(sub)
    _add_classifier_command(sub)
    mx = sub.add_parser(
        "mix",
        help="build a mixture config's shuffled sample index over its token builds under "
        "mixtures/<name>-<hash12>/ (train.npy, validation.npy, runs.npy, _MANIFEST.json)",
    )
    mx.add_argument("config", help="mixture config file (.toml or .json)")
    _add_root(mx)
    mx.add_argument("--workers", type=int, default=None, help="processes hashing document ids")
    mx.set_defaults(func=cmd_mix)
    e = sub.add_parser(
        "export-hf", help="export a corpus build or a task snapshot as a Hugging Face dataset"
    )
    e.add_argument("path", help="a shards _MANIFEST.json or its folder, or a task snapshot folder")
    e.add_argument("dest", help="the new dataset folder (must not exist)")
    e.set_defaults(func=cmd_export_hf)
    x = sub.add_parser(
        "export-tokens",
        help="export a token build as Megatron-LM's or nanotron's token files (the bytes "
        "datatrove's writers make), to a new folder or s3://... (docs/training.md)",
    )
    x.add_argument("path", help="a tokens _MANIFEST.json or its folder, or a published build's URL")
    x.add_argument("--format", required=True, choices=("megatron", "nanotron"))
    x.add_argument(
        "--to", required=True, help="a new folder, or s3://BUCKET/PREFIX (any fsspec URL)"
    )
    x.set_defaults(func=cmd_export_tokens)
    _add_dagster_commands(sub)
    return p


def _add_tasks_command(sub: Any) -> None:
    t = sub.add_parser("tasks", help="run (or resume) a task-dataset job and publish its snapshot")
    t.add_argument("--config", required=True, help="job config (.yaml, .yml, .toml or .json)")
    t.add_argument(
        "--output", required=True, help="the job folder (new, or existing with --resume)"
    )
    start = t.add_mutually_exclusive_group()
    start.add_argument(
        "--resume", action="store_true", help="continue the job in an existing --output"
    )
    start.add_argument(
        "--attach",
        action="store_true",
        help="run the job of the config's task partition as `corpus build` does: hold the "
        "partition's lock under --root (waiting, with a line every 5 s naming the holder, while "
        "another process runs it), then reuse its verified snapshot, resume its job or start "
        "it; --output must be the partition's folder, ROOT/tasks/NAME/HASH12",
    )
    t.add_argument(
        "--export-hf",
        default=None,
        metavar="DIR",
        help="also export the training rows to a new Hugging Face datasets folder",
    )
    t.add_argument(
        "--root",
        default=None,
        help="data root holding the corpus builds the config's inputs name and, with --attach, "
        "the partition's lock (default: $CORPUS_ROOT, else ./corpus-data)",
    )
    t.set_defaults(func=cmd_tasks)


def _add_classifier_command(sub: Any) -> None:
    c = sub.add_parser("classifier", help="quality classifiers (fastText) for corpus filters")
    csub = c.add_subparsers(dest="action", required=True, metavar="ACTION")
    t = csub.add_parser(
        "train",
        help="fetch a classifier config's examples, train it, and publish "
        "classifiers/<name>-<hash12>/ (model.bin, MANIFEST.json) under the data root",
    )
    t.add_argument("config", help="classifier config file (.toml or .json)")
    _add_root(t)
    _add_refresh(t)
    t.add_argument("--json", action="store_true", help="print one JSON object for scripts")
    t.set_defaults(func=cmd_classifier_train)


def _add_refresh(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--refresh",
        action="store_true",
        help="ask each remote source's server whether it changed since it was fetched into the "
        "raw cache (without it, a fetched source is used offline); a changed one is refused",
    )


def _add_dagster_commands(sub: Any) -> None:
    """`build`, `register` and `ui`: the commands that run on the embedded Dagster instance."""
    b = sub.add_parser(
        "build",
        help="register a config and build raw, shards, tokens and the report on Dagster "
        "(a task config: its task dataset)",
    )
    b.add_argument("file", help="config file (.toml or .json)")
    _add_root(b)
    _add_instance(b)
    b.add_argument("--workers", type=int, default=None, help="worker processes per stage")
    _add_backend(b)
    _add_refresh(b)
    b.add_argument(
        "--verbose", action="store_true", help="also print Dagster's own run log, traces and all"
    )
    b.add_argument(
        "--progress",
        action="store_true",
        help="print the stages' progress even when stderr is not a terminal",
    )
    b.add_argument(
        "--publish",
        metavar="URL",
        default=None,
        help="after a successful build, publish its shards and tokens (or task snapshot) under "
        "URL (s3://BUCKET/PREFIX or any fsspec URL), each at its path under the data root",
    )
    b.set_defaults(func=cmd_build)

    g = sub.add_parser("register", help="store a config and add its Dagster partition")
    g.add_argument("file", help="config file (.toml or .json)")
    _add_root(g)
    _add_instance(g)
    g.set_defaults(func=cmd_register)

    k = sub.add_parser("check", help="run a built partition's checks again (no rebuild)")
    k.add_argument("target", help="the config file, or its partition key")
    _add_root(k)
    _add_instance(k)
    k.set_defaults(func=cmd_check)

    f = sub.add_parser(
        "forget",
        help="drop a partition from the Dagster instance (refused while a run of it is queued "
        "or running); --data also removes its build's shards, tokens, report and export",
    )
    f.add_argument("key", help="the partition key (`corpus register` prints it)")
    f.add_argument(
        "--data",
        action="store_true",
        help="also remove the build's files (never the raw cache or another build's files)",
    )
    _add_root(f)
    _add_instance(f)
    f.set_defaults(func=cmd_forget)

    u = sub.add_parser(
        "ui",
        help="start the Dagster UI and daemon (dagster dev) on this data root, on --host and "
        "--port (default 127.0.0.1:3000)",
    )
    _add_root(u)
    _add_instance(u)
    u.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    u.add_argument("--port", type=int, default=3000, help="port (default 3000)")
    u.set_defaults(func=cmd_ui)


def _add_root(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--root",
        default=None,
        help="data root (default: $CORPUS_ROOT, else the folder holding $DAGSTER_HOME when that "
        "is <root>/dagster, else ./corpus-data)",
    )


def _add_backend(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="where shard and tokenize tasks run: local worker processes (default) or Ray",
    )
    p.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="the Ray cluster to use (HOST:PORT); without it --backend ray starts a local Ray "
        "for the stage and stops it after",
    )
    p.add_argument(
        "--ray-shared-root",
        choices=("yes", "no"),
        default="yes",
        help="yes (default): every Ray node mounts the data root at the same path (checked "
        "first); no: tasks get their inputs and send their files back through Ray's object "
        "store, and only this machine needs the data root",
    )


def _add_instance(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--instance",
        default=None,
        metavar="URL",
        help="Dagster storage on PostgreSQL: postgresql+psycopg2://USER[:PASSWORD]@HOST[:PORT]/DB "
        "(default: $CORPUS_DAGSTER_PG_URL, else SQLite under the data root)",
    )


def _run(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    try:
        return func(args)
    except CorpusError as exc:
        print(f"corpus {args.command}: error: {mask_text(str(exc))}", file=sys.stderr, flush=True)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        print(f"corpus {args.command}: interrupted", file=sys.stderr, flush=True)
        return int(getattr(exc, "exit_code", 130))  # 143 for a `corpus build` SIGTERM
    except OSError as exc:
        if exc.filename is None:
            raise
        from corpus_assets.core.store.atomic import disk_error

        error = disk_error(exc, Path(exc.filename))  # one line that names the path
        print(f"corpus {args.command}: error: {error}", file=sys.stderr, flush=True)
        return error.exit_code


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    try:
        code = _run(args.func, args)
    except Exception:
        traceback.print_exc()
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
