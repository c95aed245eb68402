"""The one resource that runs `corpus` subprocesses: Pipes, heartbeats, termination, exit codes.

A Pipes session (temp-file context and messages) around our own `Popen` loop, because
`PipesSubprocessClient.run` blocks until the child exits and so cannot notice a silent one.
"""

import os
import shlex
import sys
import warnings
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Literal, NoReturn

import dagster as dg
from pydantic import Field

from corpus_assets.core.errors import EXIT_DATA, EXIT_TRANSIENT, EXIT_USAGE
from corpus_assets.resources.retries import (
    FETCH_RETRY,
    NETWORK,
    RETRY_POLICIES,
    STAGE_RETRY,
    retry_delay,
)
from corpus_assets.resources.stage_failure import StageFailure, from_messages
from corpus_assets.resources.supervise import Outcome, supervise

GIVE_UP = {EXIT_USAGE: "bad config or usage", EXIT_DATA: "bad data"}


class StageRunner(dg.ConfigurableResource["StageRunner"]):
    """Runs one stage of the `corpus` CLI as a child process speaking Dagster Pipes."""

    command: list[str] | None = Field(
        default=None,
        description="argv that runs the `corpus` CLI; default: this Python, -m corpus_assets.cli",
    )
    heartbeat_timeout_s: float = Field(
        default=120.0, gt=0, description="stop a stage that prints nothing for this long; retried"
    )
    termination_timeout_s: float = Field(
        default=20.0, ge=0, description="after SIGINT, wait this long before SIGKILL"
    )
    workers: int | None = Field(default=None, ge=1, description="--workers (default: all cores)")
    backend: Literal["local", "ray"] = Field(
        default="local",
        description="--backend: shard and tokenize tasks in local worker processes, or on Ray",
    )
    ray_address: str | None = Field(
        default=None,
        description="--ray-address HOST:PORT of the Ray cluster (backend ray); none: a local "
        "Ray per stage. Every node must see the data root at the same path, unless "
        "ray_shared_root is false",
    )
    ray_shared_root: bool = Field(
        default=True,
        description="--ray-shared-root: every Ray node mounts the data root at the same path "
        "(checked); false: tasks get their inputs and send their files back through Ray's "
        "object store (backend ray)",
    )
    refresh: bool = Field(
        default=False,
        description="--refresh: fetch asks each remote source's server whether it changed since "
        "it was fetched (a changed one is refused); without it the raw cache is used offline",
    )
    fetch_retry_delay_s: float = Field(
        default=float(FETCH_RETRY.delay or 0),
        ge=0,
        description="base delay before fetch or classifier training is retried (doubles, jitter)",
    )
    stage_retry_delay_s: float = Field(
        default=float(STAGE_RETRY.delay or 0),
        ge=0,
        description="base delay before shard or tokenize is retried (doubles per try)",
    )

    def run_stage(
        self, context: dg.AssetExecutionContext, stage: str, config_file: Path, root: Path
    ) -> dg.MaterializeResult[Any]:
        """`corpus run --stage STAGE`: the materialization it reported, or a Failure."""
        what = f"run --stage {stage}"
        try:
            results = self._run(
                context, self.stage_args(stage, config_file, root), what, _last_try(context, stage)
            )
        except dg.Failure as error:
            self._raise_retry_or(context, stage, error)
        return self._one_materialization(results, what)

    def stage_args(self, stage: str, config_file: Path, root: Path) -> list[str]:
        """The `corpus` arguments of one stage, execution settings included."""
        args = ["run", "--stage", stage, "--config", str(config_file), "--root", str(root)]
        if self.workers is not None:
            args += ["--workers", str(self.workers)]
        if stage == "fetch" and self.refresh:
            args.append("--refresh")
        if stage != "fetch":  # fetch has no tasks to place
            if self.backend != "local":
                args += ["--backend", self.backend]
            if self.ray_address is not None:  # without backend ray: the stage's usage error
                args += ["--ray-address", self.ray_address]
            if not self.ray_shared_root:  # without backend ray: the stage's usage error
                args += ["--ray-shared-root", "no"]
        return args

    def run_tasks(
        self, context: dg.AssetExecutionContext, config_file: Path, folder: Path, root: Path
    ) -> dg.MaterializeResult[Any]:
        """`corpus tasks --attach`: under the partition's lock, it waits for another run of the
        partition, then reuses the published snapshot, resumes the job in `folder` or starts it."""
        argv = ["tasks", "--attach", "--config", str(config_file), "--output", str(folder)]
        argv += ["--root", str(root)]
        try:
            results = self._run(context, argv, "tasks", _last_try(context, "tasks"))
        except dg.Failure as error:
            self._raise_retry_or(context, "tasks", error)
        return self._one_materialization(results, "tasks")

    def run_classifier(
        self, context: dg.AssetExecutionContext, config_file: Path, root: Path
    ) -> None:
        """`corpus classifier train`: train and publish the partition's model (a published one
        of the same config is kept), or a Failure with the command's one line."""
        argv = ["classifier", "train", str(config_file), "--root", str(root)]
        try:
            self._run(
                context,
                [*argv, "--refresh"] if self.refresh else argv,
                "classifier train",
                _last_try(context, "classifier"),
            )
        except dg.Failure as error:
            self._raise_retry_or(context, "classifier", error)

    def run_mix(self, context: dg.AssetExecutionContext, config_file: Path, root: Path) -> None:
        """`corpus mix`: build and publish the partition's sample index (a built one is kept),
        or a Failure with the command's one line (not retried)."""
        argv = ["mix", str(config_file), "--root", str(root)]
        if self.workers is not None:
            argv += ["--workers", str(self.workers)]
        self._run(context, argv, "mix")

    def _one_materialization(
        self, results: Sequence[dg.PipesExecutionResult], what: str
    ) -> dg.MaterializeResult[Any]:
        found = [r for r in results if isinstance(r, dg.MaterializeResult)]
        if len(found) != 1:
            raise dg.Failure(
                f"`corpus {what}` succeeded but reported {len(found)} "
                "materializations through Pipes, expected 1",
                allow_retries=False,
            )
        return found[0]

    def _raise_retry_or(
        self, context: dg.AssetExecutionContext, stage: str, error: dg.Failure
    ) -> NoReturn:
        """Raise a retryable failure as a retry request (the policy's tries, this runner's
        delay), else the failure itself (no chained trace before its sentence)."""
        policy = RETRY_POLICIES[stage]
        if not error.allow_retries or policy.max_retries < 1:
            raise error
        base = self.fetch_retry_delay_s if stage in NETWORK else self.stage_retry_delay_s
        wait = retry_delay(policy, base, context.retry_number + 1)
        # chained: when the retries run out, Dagster reports this failure's own sentence
        raise dg.RetryRequested(max_retries=policy.max_retries, seconds_to_wait=wait) from error

    def run_cleanup(
        self,
        context: dg.OpExecutionContext,
        config_file: Path,
        root: Path,
        keep_newer_than: float | None = None,
    ) -> None:
        """`corpus cleanup`: delete a build's shards, tokens and staging (never raw), unless a
        manifest of it was published after `keep_newer_than` (a Unix time)."""
        argv = ["cleanup", "--config", str(config_file), "--root", str(root)]
        if keep_newer_than is not None:
            argv += ["--keep-newer-than", repr(keep_newer_than)]
        self._run(context, argv, "cleanup")

    def argv(self, args: Sequence[str]) -> list[str]:
        prefix = self.command or [sys.executable, "-m", "corpus_assets.cli"]
        return [*prefix, *args]

    def _run(
        self,
        context: dg.AssetExecutionContext | dg.OpExecutionContext,
        args: Sequence[str],
        what: str,
        last_try: bool = True,
    ) -> Sequence[dg.PipesExecutionResult]:
        """Run `corpus ARGS` (`what` names it in messages) in a Pipes session; a Failure built
        from what the child reported through Pipes (its sentence, exit code, upstream flag) and
        its exit, when it fails."""
        argv = self.argv(args)
        with ExitStack() as stack:
            with warnings.catch_warnings():
                # Dagster's own Pipes code warns about a preview API on every session.
                warnings.filterwarnings("ignore", message=".*expected_writer_count")
                session = stack.enter_context(
                    dg.open_pipes_session(
                        context=context,
                        context_injector=dg.PipesTempFileContextInjector(),
                        message_reader=dg.PipesTempFileMessageReader(),
                    )
                )
            try:
                outcome = supervise(
                    argv,
                    env={**os.environ, **session.get_bootstrap_env_vars()},
                    heartbeat_timeout_s=self.heartbeat_timeout_s,
                    termination_timeout_s=self.termination_timeout_s,
                )
            except (dg.DagsterExecutionInterruptedError, KeyboardInterrupt) as exc:
                # Dagster would retry an interrupted step that has a retry policy; a cancelled
                # run must stop instead (the child is already stopped).
                raise dg.Failure(
                    f"`corpus {what}` stopped: the run was interrupted or cancelled",
                    allow_retries=False,
                ) from exc
        if outcome.returncode != 0 or outcome.timed_out:
            # the command and the stderr tail go to the run log; the asset logs the sentence
            context.log.info(f"`corpus {what}` failed; command: {shlex.join(argv)}")
            raise failure(what, outcome, last_try, from_messages(session.get_custom_messages()))
        return session.get_results(implicit_materializations=False)


def _last_try(context: dg.AssetExecutionContext, stage: str) -> bool:
    """Whether this try is the last the stage's retry policy allows."""
    return bool(context.retry_number >= RETRY_POLICIES[stage].max_retries)


def failure(
    what: str, outcome: Outcome, last_try: bool = False, reported: StageFailure | None = None
) -> dg.Failure:
    """The step failure for a child that failed: retryable unless the exit code says give up.

    `reported` is what the child sent through Pipes (its sentence, exit code and upstream flag);
    a child that crashed or was killed sent nothing, and its exit says what happened. A stage
    stopped after its heartbeat timeout counts as transient (exit 75): it hung on something
    outside it, such as a server. The sentence says what happens next: a retry, or none when
    this was the last try.
    """
    code = EXIT_TRANSIENT if outcome.timed_out else outcome.returncode
    if reported is not None and not outcome.timed_out and code > 0:  # exited as it reported
        code = reported.exit_code
    sentence = reported.sentence if reported is not None else ""
    then = "no tries left" if last_try else "retried"
    if outcome.timed_out:
        reason = f"silent for {outcome.silent_for:.0f} s (heartbeat timeout); stopped, {then}"
    elif code in GIVE_UP:
        reason = f"exit {code} ({GIVE_UP[code]}), not retried"
    elif code == EXIT_TRANSIENT:
        reason = f"exit {code} (transient), {then}" + ("" if last_try else " with backoff")
    elif code < 0:
        reason = f"killed by signal {-code}, {then}"
    else:
        reason = f"exit {code} (crash), {then}"
    return dg.Failure(
        # one line: the stage's own sentence, then what the runner did about it; the traceback,
        # if any, is in `stderr_tail` and the step's stderr
        description=f"{sentence} (`corpus {what}` {reason})"
        if sentence
        else f"`corpus {what}` {reason}",
        metadata={
            "exit_code": code,
            "outcome": reason,
            "upstream_missing": reported is not None and reported.upstream_missing,
            # as the CLI printed it (`corpus build` shows this line)
            "error_line": f"corpus {what.split()[0]}: error: {sentence}" if sentence else "",
            "heartbeat_timeout": outcome.timed_out,
            "stderr_tail": dg.MetadataValue.md("```\n" + "\n".join(outcome.stderr_tail) + "\n```"),
        },
        allow_retries=code not in GIVE_UP,
    )
