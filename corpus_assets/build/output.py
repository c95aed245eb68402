"""What `corpus build` says on stderr, and the full run log it keeps under the data root.

Quiet by default: Dagster's console log is off, and whatever reaches stderr while the run executes
(the stages' progress and error lines, warnings) is captured. Stage progress is passed through
only when stderr is a terminal. After the run, the run's whole event log (Dagster's messages with
their stack traces) and the captured stderr go to `<root>/logs/<run_id>.log`, and stderr gets one
line on success, two on failure: the failing stage's own error line with the run id, and the log's
path. `--verbose` shows everything as it happens, as Dagster prints it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg

from corpus_assets.core.errors import CorpusError
from corpus_assets.core.store.atomic import private_dir, write_bytes
from corpus_assets.core.store.layout import Layout, tighten_existing
from corpus_assets.instance.home import tighten_instance

Emit = Callable[[str], None]
STAGE_OF_STEP = {"raw": "fetch", "shards": "shard", "tokens": "tokenize"}
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
STDERR_FD = 2
_capturing = threading.Lock()  # fd 2 is process-wide: one capture at a time


class BuildOutput:
    """The stderr of one `corpus build`: quiet, live (a terminal) or verbose."""

    def __init__(self, say: Emit, verbose: bool = False, live: bool | None = None) -> None:
        self.say = say
        self.verbose = verbose
        self.live = verbose or (_stderr_is_terminal() if live is None else live)
        self.captured: list[str] = []

    @property
    def run_config(self) -> dict[str, Any] | None:
        """Dagster's console log as it is with --verbose, else off (it goes to the log file)."""
        return None if self.verbose else QUIET_LOGS

    def note(self, line: str) -> None:
        """A line worth showing only while someone watches (a terminal) or with --verbose."""
        if self.live:
            self.say(line)

    @contextmanager
    def capture(self) -> Iterator[None]:
        """Collect everything written to fd 2 meanwhile; echo it when live."""
        if not _capturing.acquire(blocking=False):
            yield  # another build in this process holds fd 2
            return
        try:
            with _fd2_to_pipe(self.captured, echo=self.live):
                yield
        finally:
            _capturing.release()

    def finish(
        self,
        instance: dg.DagsterInstance,
        result: dg.ExecuteInProcessResult,
        root: Path,
        seconds: float,
    ) -> None:
        """Write the run's full log; say how the run ended (one line, two on failure)."""
        try:
            where = str(write_run_log(instance, result.run_id, self.captured, Layout(root)))
        except CorpusError as exc:  # a full disk must not hide how the run ended
            where = f"not written ({exc})"
        with contextlib.suppress(OSError):  # the folders are 0700 whatever happens here
            tighten_instance(Path(instance.root_directory), result.run_id)
            tighten_existing(Layout(root))
        run = f"[corpus] run {result.run_id}"
        if result.success:
            self.say(f"{run} succeeded in {seconds:.1f} s; full log: {where}")
        else:
            self.say(f"{run} FAILED in {seconds:.1f} s: {failure_line(result)}")
            self.say(f"[corpus] full log: {where}")


def _stderr_is_terminal() -> bool:
    try:
        return os.isatty(STDERR_FD)
    except OSError:
        return False


@contextmanager
def _fd2_to_pipe(lines: list[str], echo: bool) -> Iterator[None]:
    """Point fd 2 at a pipe; a thread collects its lines (and echoes them to the old fd 2)."""
    _flush()
    try:
        saved = os.dup(STDERR_FD)
    except OSError:  # no stderr at all (closed): nothing to capture or to keep quiet
        yield
        return
    read_end, write_end = os.pipe()
    reader = threading.Thread(target=_pump, args=(read_end, saved, lines, echo), daemon=True)
    reader.start()
    os.dup2(write_end, STDERR_FD)
    os.close(write_end)
    try:
        yield
    finally:
        _flush()
        os.dup2(saved, STDERR_FD)  # the pipe's last writer is gone: the reader sees its end
        reader.join(timeout=5)
        os.close(saved)


def _flush() -> None:
    if sys.stderr is not None:  # None when the process was started with fd 2 closed
        sys.stderr.flush()


def _pump(read_end: int, echo_fd: int, lines: list[str], echo: bool) -> None:
    with os.fdopen(read_end, "rb") as pipe:
        for raw in pipe:
            if echo:
                os.write(echo_fd, raw)
            lines.append(raw.decode("utf-8", errors="replace").rstrip("\n"))


def failure_line(result: dg.ExecuteInProcessResult) -> str:
    """`<stage>: <the stage's own error line>` of the first failed step, else the run's error."""
    for event in result.all_events:
        if event.is_step_failure:
            step = event.step_key or "run"
            data = event.step_failure_data
            if data.error is not None and data.error.cls_name == "DagsterAssetCheckFailedError":
                return f"{step}: {_failed_checks(result)}"
            return f"{STAGE_OF_STEP.get(step, step)}: {_step_error(data)}"
    for event in result.all_events:
        if event.is_failure and event.event_specific_data is not None:
            error = getattr(event.event_specific_data, "error", None)
            if error is not None:
                return _first_line(error.message)
    return "the run failed (see the full log)"


def _failed_checks(result: dg.ExecuteInProcessResult) -> str:
    """`check NAME failed: <its first problem>` for each failed check."""
    failed = []
    for evaluation in result.get_asset_check_evaluations():
        if not evaluation.passed:
            problems = evaluation.metadata.get("problems")
            first = _first_line(str(problems.value)).removeprefix("- ") if problems else ""
            failed.append(f"check {evaluation.check_name} failed" + (f": {first}" if first else ""))
    return "; ".join(failed) or "a blocking check failed"


def _step_error(data: Any) -> str:
    failure = data.user_failure_data
    if failure is not None:
        line = failure.metadata.get("error_line")
        if line is not None and "error:" in str(line.value):
            return str(line.value)
        if failure.description:
            return _first_line(failure.description)
    if data.error is not None:
        return _first_line(error_message(data.error))
    return "failed"


def error_message(error: Any) -> str:
    """A step's error message (of a SerializableErrorInfo); under Dagster's wrapper ("Error
    occurred while executing op ..."), the message of the exception it wraps."""
    while error.cls_name == "DagsterExecutionStepExecutionError" and error.cause is not None:
        error = error.cause
    return str(error.message).strip()


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else text


def write_run_log(
    instance: dg.DagsterInstance, run_id: str, stderr: list[str], layout: Layout
) -> Path:
    """`<root>/logs/<run_id>.log` (owner-only: it quotes documents): every event of the run,
    then the stderr captured during it."""
    out = [f"# corpus build, run {run_id}: Dagster's event log", ""]
    for entry in instance.all_logs(run_id):
        out.extend(_entry_lines(entry))
    out += ["", "# stderr during the run (the stages' output)", "", *stderr]
    path = layout.run_log(run_id)
    private_dir(layout.logs)
    write_bytes(path, ("\n".join(out) + "\n").encode("utf-8"))
    return path


def _entry_lines(entry: dg.EventLogEntry) -> list[str]:
    when = datetime.fromtimestamp(entry.timestamp, UTC).isoformat(timespec="milliseconds")
    event = entry.dagster_event
    kind = event.event_type_value if event is not None else "LOG"
    level = entry.level if isinstance(entry.level, str) else _level_name(entry.level)
    message = entry.user_message or (event.message if event is not None else "") or ""
    first, *rest = (message or "-").splitlines() or ["-"]
    lines = [f"{when} {level} {entry.step_key or '-'} {kind} {first}", *_indented(rest)]
    data = event.event_specific_data if event is not None else None
    failure = getattr(data, "user_failure_data", None)
    if failure is not None:
        for key, value in failure.metadata.items():
            lines += _indented(f"{key}: {value.value}".splitlines())
    error = getattr(data, "error", None)
    if error is not None:
        lines += _indented(error.to_string().splitlines())
    return lines


def _indented(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


def _level_name(level: int) -> str:
    import logging

    return logging.getLevelName(level)
