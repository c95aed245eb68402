"""`corpus build` cleans up after its own run when it fails for good or is interrupted.

`corpus build` runs without a daemon, so no sensor would delete what a failed run left. Around
the run, `compensating()`:

- claims the run: holds a lock on a file that the run's `corpus/compensated_by` tag names; the
  cleanup sensors skip a run whose claim is held (sensors/cleanup.py), so a daemon running
  beside this process leaves the cleanup to it, and takes over if this process dies;
- makes SIGTERM behave like Ctrl-C (Dagster stops the stage subprocess, the run ends FAILED, or
  CANCELED when a cancel was requested) and notes which signal came;
- afterwards applies the sensors' rule (`cleanup_request`: no cleanup runs, no will-retry runs,
  nothing before the shard stage started, nothing twice) and runs the cleanup job in-process with
  the tags a sensor's run would carry (`dagster/run_key` = the failed run id,
  `dagster/sensor_name`): the daemon de-duplicates run keys per sensor name over every run of
  the instance, so it counts the cleanup as its own.

The cleanup runs in a worker thread, so a second Ctrl-C cannot stop it half-way (Dagster only
installs its interrupt handlers on the main thread). An interrupted build then raises
`BuildInterrupted` (exit 130 for SIGINT, 143 for SIGTERM).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import dagster as dg

from corpus_assets.core.store.locks import file_lock
from corpus_assets.instance.failures import forget_unrun_checks
from corpus_assets.jobs import CLEANUP_JOB
from corpus_assets.sensors.cleanup import (
    CANCEL_SENSOR,
    CLEANUP_PARTITION_TAG,
    COMPENSATED_BY_TAG,
    FAILURE_SENSOR,
    RUN_KEY_TAG,
    SENSOR_NAME_TAG,
    cleanup_request,
)

Emit = Callable[[str], None]
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
UNFINISHED = "`corpus build` was interrupted before its run finished"


class BuildInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM reached `corpus build`; its run is over and compensated."""

    def __init__(self, signum: int, run_id: str | None) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum
        self.run_id = run_id
        self.exit_code = 128 + signum


@dataclass
class Claim:
    """This process's claim on the run it is about to start."""

    path: Path

    @property
    def tags(self) -> dict[str, str]:
        """Tags for the build run: where the claim is."""
        return {COMPENSATED_BY_TAG: str(self.path)}


@contextlib.contextmanager
def compensating(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    say: Emit,
    run_config: Mapping[str, Any] | None = None,
    enabled: bool = True,
) -> Iterator[Claim]:
    """Run the body (one run tagged with `Claim.tags`), then clean up after it if the rule says."""
    interrupted = False
    with _claimed(instance, hold=enabled) as path, _Signals() as signals:
        claim = Claim(path)
        try:
            yield claim
        except KeyboardInterrupt:
            interrupted = True
        finally:
            signals.hold()
            run = _finished_run(instance, claim)
            if enabled and run is not None:
                _compensate(instance, run, defs.resolve_job_def(CLEANUP_JOB), say, run_config)
        signum = signals.received() or (signal.SIGINT if interrupted else None)
    cancelled = run is not None and run.status == dg.DagsterRunStatus.CANCELED
    if signum is not None and not cancelled:  # a cancel's SIGINT stops the run, not the build
        raise BuildInterrupted(signum, run.run_id if run else None)


def _finished_run(instance: dg.DagsterInstance, claim: Claim) -> dg.DagsterRun | None:
    """The claimed run, marked CANCELED or FAILED if an interrupt left it unfinished."""
    runs = instance.get_runs(filters=dg.RunsFilter(tags=claim.tags), limit=1)
    if not runs:
        return None
    run = runs[0]
    if not run.is_finished:
        if run.status == dg.DagsterRunStatus.CANCELING:
            instance.report_run_canceled(run, UNFINISHED)
        else:
            instance.report_run_failed(run, UNFINISHED)
        run = instance.get_run_by_id(run.run_id) or run
    return run


def _compensate(
    instance: dg.DagsterInstance,
    run: dg.DagsterRun,
    cleanup_job: dg.JobDefinition,
    say: Emit,
    run_config: Mapping[str, Any] | None,
) -> None:
    """The cleanup a sensor would launch for `run`, run here; one line on what happened."""
    canceled = run.status == dg.DagsterRunStatus.CANCELED
    if run.status != dg.DagsterRunStatus.FAILURE and not canceled:
        return
    forget_unrun_checks(instance, run.run_id)
    request = cleanup_request(instance, run, "was cancelled" if canceled else "failed")
    if isinstance(request, dg.SkipReason):
        return
    tags = {
        **request.tags,
        RUN_KEY_TAG: str(request.run_key),
        SENSOR_NAME_TAG: CANCEL_SENSOR if canceled else FAILURE_SENSOR,
    }
    config = {**request.run_config, **(run_config or {})}
    result = _in_thread(
        lambda: cleanup_job.execute_in_process(
            run_config=config, instance=instance, tags=tags, raise_on_error=False
        )
    )
    partition = request.tags[CLEANUP_PARTITION_TAG]
    what = "cancelled" if canceled else "failed"
    if result is not None and result.success:
        say(f"[corpus] cleaned up {partition} after {what} run {run.run_id}")
    else:
        ran = f" (cleanup run {result.run_id})" if result is not None else ""
        say(
            f"[corpus] cleanup of {partition} after {what} run {run.run_id} FAILED{ran}; "
            f"remove its shards, tokens and staging with "
            f"`corpus cleanup --config <root>/configs/{partition[-12:]}.json`"
        )


def _in_thread(work: Callable[[], dg.ExecuteInProcessResult]) -> dg.ExecuteInProcessResult | None:
    """`work()` on a worker thread, out of reach of Ctrl-C; None if it raised."""
    out: list[dg.ExecuteInProcessResult] = []

    def run() -> None:
        with contextlib.suppress(Exception):
            out.append(work())

    worker = threading.Thread(target=run, name="corpus-cleanup")
    worker.start()
    worker.join()
    return out[0] if out else None


@contextlib.contextmanager
def _claimed(instance: dg.DagsterInstance, hold: bool) -> Iterator[Path]:
    """A new file under the instance, exclusively locked (if `hold`) while the body runs."""
    folder = Path(instance.root_directory) / "claims"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"build-{os.getpid()}-{uuid.uuid4().hex[:12]}.lock"
    claim = file_lock(path, "this build's cleanup claim") if hold else contextlib.nullcontext()
    with claim:
        try:
            yield path
        finally:
            path.unlink(missing_ok=True)  # while still held: the sensors never see it released


class _Signals:
    """SIGTERM raises KeyboardInterrupt like Ctrl-C; remembers which arrived, whoever handled it.

    Dagster replaces the SIGINT and SIGTERM handlers while a run executes, so the signals are
    noted through the wakeup fd, which Python writes on every signal it handles.
    """

    def __init__(self) -> None:
        self.active = threading.current_thread() is threading.main_thread()
        self.seen: list[int] = []

    def __enter__(self) -> _Signals:
        if not self.active:
            return self
        self.read_fd, self.write_fd = os.pipe()
        for fd in (self.read_fd, self.write_fd):
            os.set_blocking(fd, False)
        self.previous_fd = signal.set_wakeup_fd(self.write_fd, warn_on_full_buffer=False)
        self.previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        return self

    def hold(self) -> None:
        """From now on only note the signals (the run is over; compensation must finish)."""
        if self.active:
            for sig in STOP_SIGNALS:
                signal.signal(sig, _note_only)

    def received(self) -> int | None:
        """SIGINT or SIGTERM if one arrived since `__enter__` (the first one)."""
        if self.active:
            with contextlib.suppress(BlockingIOError):
                while chunk := os.read(self.read_fd, 512):
                    self.seen += [s for s in chunk if s in STOP_SIGNALS]
        return self.seen[0] if self.seen else None

    def __exit__(self, *exc: object) -> None:
        if not self.active:
            return
        self.received()
        for sig, handler in self.previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        signal.set_wakeup_fd(self.previous_fd)
        os.close(self.read_fd)
        os.close(self.write_fd)


def _note_only(_signo: int, _frame: FrameType | None) -> None:
    """A stop signal during compensation: noted by the wakeup fd, acted on afterwards."""
