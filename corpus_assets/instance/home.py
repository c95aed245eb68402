"""The embedded Dagster instance under the data root: its home, its dagster.yaml, opening it."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corpus_assets.core.signals import sigint_blocked
from corpus_assets.core.store.atomic import private_dir, tighten, tighten_tree, write_bytes
from corpus_assets.core.store.layout import Layout
from corpus_assets.core.store.locks import file_lock

if TYPE_CHECKING:
    import dagster as dg

SQLITE_STORAGE = """\
# Storage: SQLite files in this folder (Dagster's default; for PostgreSQL: `--instance URL`,
# whose instance lives in <root>/dagster-postgres).
"""

DAGSTER_YAML_HEAD = """\
# The Dagster instance of this data root, written by `corpus` (edit freely: an existing file is
# never overwritten). Loaded by every `dagster` command run with DAGSTER_HOME set here.
"""

DAGSTER_YAML_REST = """\
# Run monitoring here only times out runs stuck STARTING or CANCELING: the default run launcher
# cannot health-check a run worker. A run whose process died is marked failed by the next
# `corpus build` on this root and by the sensor corpus_dead_runs while the daemon runs.
run_monitoring:
  enabled: true
  poll_interval_seconds: 10
# Run retries re-execute a failed run from failure (finished stages are not redone). Off unless a
# run or job carries the tag dagster/max_retries (e.g. --tags '{"dagster/max_retries": "2"}').
# Step failures have their own retry policies; corpus_build runs set
# dagster/retry_on_asset_or_op_failure=false so only crashed run workers are retried whole.
run_retries:
  enabled: true
  max_retries: 0
  retry_on_asset_or_op_failure: true
# One run per partition at a time: a second run of a partition that is being built (a backfill,
# the UI's Materialize) waits in the queue. `corpus build` and `dagster job execute` do not pass
# through the queue; the stages' own locks keep them single-flight.
concurrency:
  runs:
    tag_concurrency_limits:
      - key: dagster/partition
        value:
          applyLimitPerUniqueValue: true
        limit: 1
telemetry:
  enabled: false
"""

DAGSTER_YAML = DAGSTER_YAML_HEAD + SQLITE_STORAGE + DAGSTER_YAML_REST
OPEN_WAIT_S = 120.0
"""How long `corpus build` (a person at a terminal) waits for another process opening the
instance; past it, a transient error naming the holder."""


def dagster_home(root: Path) -> Path:
    """`$DAGSTER_HOME` when set, else `<root>/dagster`."""
    home = os.environ.get("DAGSTER_HOME")
    return Path(home).resolve() if home else Layout(root.resolve()).dagster_home


def ensure_home(home: Path, text: str = DAGSTER_YAML) -> Path:
    """Create the instance folder, owner-only (0700: its runs' logs quote documents), and its
    dagster.yaml `text` (0600; never overwriting one)."""
    private_dir(home)
    yaml = home / "dagster.yaml"
    if not yaml.exists():
        write_bytes(yaml, text.encode("utf-8"))
    return home


def open_instance(root: Path) -> dg.DagsterInstance:
    """The instance of data root `root`; sets DAGSTER_HOME for this process and its children.

    The data root's private folders (raw/, work/, logs/) are made owner-only first, so that the
    stages the instance runs write into them privately.
    """
    Layout(root.resolve()).secure()
    return open_home(ensure_home(dagster_home(root)))


def tighten_instance(home: Path, run_id: str) -> None:
    """Make what Dagster wrote into `home` for run `run_id` owner-only (it writes as the umask
    says; the folder's 0700 already keeps it from others): the instance's own files and folders,
    and that run's event log and compute logs; other runs' files are not visited."""
    if not home.is_dir():
        return
    for entry in home.iterdir():
        if entry.name not in ("history", "storage"):
            tighten_tree(entry)
    history, storage = home / "history", home / "storage"
    for folder in (history, history / "runs", storage):
        if folder.is_dir():
            tighten(folder)
            for entry in folder.iterdir():
                if entry.is_file() and not _of_another_run(entry, run_id):
                    tighten(entry)
    if (storage / run_id).exists():
        tighten_tree(storage / run_id)


def _of_another_run(file: Path, run_id: str) -> bool:
    """Whether `file` in history/runs/ is another run's event log (`<run id>.db`, -wal, -shm)."""
    stem = file.name.split(".", 1)[0]
    return len(stem) == 36 and stem.count("-") == 4 and stem != run_id


def open_home(home: Path) -> dg.DagsterInstance:
    """The instance of folder `home`; sets DAGSTER_HOME for this process and its children."""
    import dagster as dg

    os.environ["DAGSTER_HOME"] = str(home)
    # The first open creates the tables; two `corpus build`s starting together on a new root
    # would both try ("table runs already exists"), so opening is serialized.
    with file_lock(home / ".open.lock", f"the Dagster instance in {home}", wait=OPEN_WAIT_S):
        return dg.DagsterInstance.get()


def seed_retry_cursors(instance: dg.DagsterInstance) -> None:
    """Start the run-retry daemon's missing cursors at the instance's newest event, as the
    daemon does on its first tick, so that it starts without its warning per event ("No cursor
    for event type ..., ignoring older events"). Call it only when the daemon starts: a cursor
    set earlier would make it retry the runs that failed in between.

    The daemon (EventLogConsumerDaemon, on while `run_retries` is enabled) follows run failures
    and successes, each with the cursor `EVENT_LOG_CONSUMER_CURSOR-<event type value>` in the
    instance's daemon cursor storage (dagster 1.13).
    """
    import dagster as dg

    events = (dg.DagsterEventType.RUN_FAILURE, dg.DagsterEventType.RUN_SUCCESS)
    keys = {f"EVENT_LOG_CONSUMER_CURSOR-{event.value}" for event in events}
    storage = instance.daemon_cursor_storage
    missing = keys - set(storage.get_cursor_values(keys))
    if missing:
        newest = instance.event_log_storage.get_maximum_record_id() or 0
        storage.set_cursor_values(dict.fromkeys(sorted(missing), str(newest)))


def deaf_log_watchers(instance: dg.DagsterInstance) -> dg.DagsterInstance:
    """`instance`, its compute log capture starting its helper processes with SIGINT blocked.

    To mirror a run's stdout and stderr into its compute logs, Dagster's local compute log
    manager starts a `tail -F` for each and, watching each tail, a Python process
    (`watch_orphans.py`), all in this process group, where a Ctrl-C at the terminal would make
    each watcher print a KeyboardInterrupt traceback. Started with SIGINT blocked they never
    receive it (Dagster has no setting for this: this instance's manager gets a wrapping
    `capture_logs`); Dagster's teardown still stops them with SIGTERM, and a watcher whose
    parent dies still stops its tail.
    """
    manager = instance.compute_log_manager
    capture = manager.capture_logs

    @contextmanager
    def capture_logs(log_key: Sequence[str]) -> Iterator[Any]:
        with ExitStack() as stack:
            with sigint_blocked():
                context = stack.enter_context(capture(log_key))
            yield context

    manager.capture_logs = capture_logs  # type: ignore[method-assign]
    return instance
