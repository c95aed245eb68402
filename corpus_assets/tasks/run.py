"""Running a data job: `await run_data_job(...)` for Python, `run_command` for `corpus tasks`.

The coordinator runs on its own thread with its own event loop, so the caller's event loop
stays responsive while a job runs; cancelling the awaiting task (or SIGINT/SIGTERM for the
command) sets one event that the coordinator checks between chunks. It then waits for its
workers, closes the checkpoint database and records `cancelled`; a second signal or a second
cancellation changes nothing about that, and the awaiting task ends only once it is done.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from corpus_assets.core.errors import ConfigError
from corpus_assets.tasks.attach import attached
from corpus_assets.tasks.config import (
    DataJobConfig,
    LoadedJobConfig,
    load_job_config,
    loaded_config,
)
from corpus_assets.tasks.executor import CancelEvent, DataJob, Progress
from corpus_assets.tasks.export import export_hf_dataset
from corpus_assets.tasks.snapshot import Snapshot

SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}
SIGNAL_POLL_S = 0.1  # how soon the main thread relays a signal to the coordinator


def start_job(
    config: LoadedJobConfig,
    output: Path,
    resume: bool,
    cancel: threading.Event,
    progress: Progress | None,
    done: Callable[[Snapshot | None, BaseException | None], None],
    root: Path | None = None,
    attach: bool = False,
) -> threading.Thread:
    """Run the job on a new coordinator thread (its own event loop); `done` gets the outcome.

    `attach`: the caller holds the task partition's lock (`attach.attached`).
    """

    async def coordinate() -> Snapshot:
        return await DataJob(config, output, resume, cancel, progress, root, attach).run()

    def target() -> None:
        try:
            result = asyncio.run(coordinate())
        except BaseException as exc:  # handed to the caller
            done(None, exc)
        else:
            done(result, None)

    thread = threading.Thread(target=target, name="task-coordinator", daemon=True)
    thread.start()
    return thread


async def run_data_job(
    config: DataJobConfig | LoadedJobConfig | str | Path,
    output: str | Path,
    resume: bool = False,
    progress: Progress | None = None,
    root: str | Path | None = None,
) -> Snapshot:
    """Run (or resume) a data job in `output` and return its verified snapshot.

    `config`: a `DataJobConfig`, or a config file's path. `root` is the data root that
    corpus-build inputs are found under.
    """
    loaded = loaded_config(config)
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[Snapshot] = loop.create_future()
    cancel = threading.Event()

    def done(result: Snapshot | None, exc: BaseException | None) -> None:
        loop.call_soon_threadsafe(_settle, outcome, result, exc)

    start_job(
        loaded, Path(output), resume, cancel, progress, done, None if root is None else Path(root)
    )
    try:
        return await asyncio.shield(outcome)
    except asyncio.CancelledError:
        cancel.set()
        await _stopped(outcome)
        raise


async def _stopped(outcome: asyncio.Future[Snapshot]) -> None:
    """Wait for the cancelled job's outcome, however often the waiting task is cancelled again:
    the coordinator has then stopped its workers, closed the database and recorded `cancelled`."""
    while not outcome.done():
        try:
            await asyncio.wait([outcome])
        except asyncio.CancelledError:
            continue  # already stopping; the caller gets its CancelledError once stopped
    if not outcome.cancelled():
        outcome.exception()  # retrieved: the caller gets CancelledError, not JobCancelled


def _settle(
    future: asyncio.Future[Snapshot], result: Snapshot | None, exc: BaseException | None
) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        assert result is not None
        future.set_result(result)


def _relay_signals(received: list[int], told: int, cancel: CancelEvent, progress: Progress) -> int:
    """Turn the signals received since `told` into the cancel request and one line each."""
    for signum in received[told:]:
        if told == 0:
            cancel.request(SIGNAL_EXIT[signal.Signals(signum)])
            progress("tasks: stopping after the current chunk (the job stays resumable)")
        else:
            progress("tasks: already stopping; waiting for workers to finish their chunk")
        told += 1
    return told


def run_command(
    config_path: str,
    output: str,
    resume: bool,
    export_hf: str | None,
    progress: Progress,
    root: Path | None = None,
    attach: bool = False,
) -> dict[str, Any]:
    """`corpus tasks`: run the job, export it if asked, return the result line's fields.

    `attach` (with `root`): the job of the config's task partition, under its lock
    (`attach.py`): it waits for another process running it, then reuses, resumes or starts it.
    """
    config = load_job_config(config_path)
    if export_hf is not None and Path(export_hf).exists():
        raise ConfigError(f"--export-hf {export_hf} already exists; choose a new folder")
    holding: AbstractContextManager[bool] = nullcontext(resume)
    if attach:
        if root is None:
            raise ConfigError("--attach needs the data root (--root) that holds the partition")
        # waited for before the signal handlers go in, so Ctrl-C ends the wait at once
        holding = attached(config, Path(output), root, progress)
    with holding as resume_now:
        snapshot = _run_signalled(config, Path(output), resume_now, progress, root, attach)
    result: dict[str, Any] = {"dataset_id": snapshot.dataset_id, "dataset_path": str(snapshot.path)}
    if export_hf is not None:
        result["training_dataset_path"] = str(
            export_hf_dataset(snapshot, Path(export_hf).absolute())
        )
    return result


def _run_signalled(
    config: LoadedJobConfig,
    output: Path,
    resume: bool,
    progress: Progress,
    root: Path | None,
    attach: bool,
) -> Snapshot:
    """Run the job on its coordinator thread; SIGINT/SIGTERM meanwhile cancel it (and once one
    came, later ones change nothing, also after the job ended: the command is exiting)."""
    cancel = CancelEvent()
    received: list[int] = []
    outcome: list[Any] = []

    def on_signal(signum: int, _frame: object) -> None:
        # Only a list append: a handler may interrupt the main thread anywhere, even inside
        # a print or an Event's lock, and a nested second signal must not wait on either.
        received.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in SIGNAL_EXIT}
    try:
        thread = start_job(
            config,
            output,
            resume,
            cancel,
            progress,
            lambda r, e: outcome.append((r, e)),
            root,
            attach,
        )
        told = 0
        while thread.is_alive():
            thread.join(SIGNAL_POLL_S)
            told = _relay_signals(received, told, cancel, progress)
    finally:
        for s, handler in previous.items():
            # once cancelled, the command is exiting with the cancel's code: the rest of a burst
            # of signals is ignored, even while the interpreter shuts down (which resets Python
            # handlers to the default, so a late SIGTERM would kill the exit)
            signal.signal(s, signal.SIG_IGN if received else handler)
    snapshot, error = outcome[0]
    if error is not None:
        raise error
    assert isinstance(snapshot, Snapshot)
    return snapshot
