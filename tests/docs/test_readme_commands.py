"""Every shell command in the README's fenced blocks runs, in order, on a fresh data root.

The commands run as written in a scratch folder that links the repository's `.venv`, `examples`,
`data`, `Makefile`, `pyproject.toml` and `workspace.yaml`, so `./corpus-data` is a new data root
and `job` a new job folder. A command that does not end (`corpus ui`) is started, probed until
its HTTP port answers, and stopped. A command this file does not know fails the test: a README
that gains a command gains a runner here.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from support.processes import stop_group
from support.servers import free_port

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
SHELLS = {"sh", "shell", "bash", "console"}
LINKED = (".venv", "examples", "data", "Makefile", "pyproject.toml", "workspace.yaml")
KEY = "tiny-stories-v1-778947f76566"

# `make test` installs Chromium and PostgreSQL, runs ruff, mypy and the whole suite, this file
# included: it cannot run inside a test. `.ci/run` runs it on every commit instead.
EXCLUDED = {"make test"}


def commands(text: str) -> list[str]:
    """The commands of the fenced shell blocks, continuation lines joined, comments dropped."""
    out: list[str] = []
    lang: str | None = None
    pending = ""
    for line in text.splitlines():
        fence = re.match(r"^\s*```(\w*)\s*$", line)
        if fence:
            lang = None if lang is not None else fence.group(1)
            continue
        if lang not in SHELLS:
            continue
        body = pending + line.strip()
        if body.endswith("\\"):
            pending = body[:-1].rstrip() + " "
            continue
        pending = ""
        body = re.sub(r"\s+#.*$", "", body) if not body.startswith("#") else ""
        if body:
            out.append(body)
    return out


def shell(work: Path, env: dict[str, str], command: str, timeout: float = 600):
    return subprocess.run(
        ["bash", "-c", command],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def last_json(stdout: str) -> dict:
    """The JSON object a command printed last (pretty-printed or on one line)."""
    start = stdout.rfind("\n{")
    return json.loads(stdout[start + 1 if start >= 0 else stdout.index("{") :])


class Session:
    """The scratch folder, the environment the `export` lines build up, and the runners."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.exports: list[str] = []
        self.env = {
            k: v
            for k, v in os.environ.items()
            # a new user's shell: no data root or instance of ours, and not inside a make (under
            # `make test`, MAKELEVEL would have the demo's make print "Entering directory")
            if k not in {"CORPUS_ROOT", "DAGSTER_HOME", "CORPUS_DAGSTER_PG_URL"}
            and k not in {"MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES"}
        }
        self.env["HF_HUB_OFFLINE"] = "1"

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        result = shell(self.work, self.env, "; ".join([*self.exports, command]))
        assert result.returncode == 0, (
            f"{command}: exit {result.returncode}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
        )
        return result

    def export(self, command: str) -> None:
        self.exports.append(command)

    def make_demo(self, command: str) -> None:
        # `-o .venv/.installed`: the venv is set up already; never reinstall it from a test
        # (another process may be using it). The recipe run is the README's.
        result = self.run(command.replace("make demo", "make -o .venv/.installed demo", 1))
        self.built(result)

    def built(self, result: subprocess.CompletedProcess[str]) -> None:
        out = last_json(result.stdout)
        assert out["success"] is True and out["partition_key"] == KEY, out
        assert (self.work / "corpus-data" / out["shards_manifest"]).is_file()

    def build(self, command: str) -> None:
        self.built(self.run(command))

    def register(self, command: str) -> None:
        assert KEY in self.run(command).stdout

    def check(self, command: str) -> None:
        result = self.run(command)
        assert "passed" in result.stdout and "failed" not in result.stdout, result.stdout

    def job_execute(self, command: str) -> None:
        result = self.run(command)
        assert "RUN_SUCCESS" in result.stdout + result.stderr

    def tasks(self, command: str) -> None:
        out = last_json(self.run(command).stdout)
        assert out["dataset_id"] and (self.work / "job" / "dataset" / "manifest.json").is_file()

    def ui(self, command: str) -> None:
        """Started, probed until its webserver answers, stopped with its process group."""
        port = free_port()
        proc = subprocess.Popen(
            ["bash", "-c", "; ".join([*self.exports, f"exec {command} --port {port}"])],
            cwd=self.work,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 180
            while True:
                assert proc.poll() is None, f"{command} exited {proc.returncode}"
                try:
                    with urllib.request.urlopen(
                        f"http://127.0.0.1:{port}/server_info", timeout=5
                    ) as reply:
                        assert reply.status == 200
                        assert "dagster_webserver_version" in reply.read().decode()
                        break
                except OSError:
                    assert time.monotonic() < deadline, f"{command}: port {port} never answered"
                    time.sleep(1)
        finally:
            stop_group(proc, signal.SIGTERM, 60.0)
            assert proc.stderr is not None
            proc.stderr.close()


Runner = Callable[[Session, str], None]

# Each README command, by its start, and how it is run.
RUNNERS: list[tuple[str, Runner]] = [
    ("make demo", Session.make_demo),
    (".venv/bin/corpus build examples/tiny.toml ", Session.build),
    (".venv/bin/corpus register ", Session.register),
    (".venv/bin/corpus ui ", Session.ui),
    ("export ", Session.export),
    (".venv/bin/dagster job execute ", Session.job_execute),
    (".venv/bin/corpus check ", Session.check),
    (".venv/bin/corpus tasks ", Session.tasks),
]


def runner(command: str) -> Runner | None:
    for start, run in RUNNERS:
        if command == start.strip() or command.startswith(start):
            return run
    return None


def test_the_readme_has_the_two_commands_and_no_unknown_one() -> None:
    found = commands(README.read_text(encoding="utf-8"))
    assert found[:2] == ["make demo", "make test"]
    unknown = [c for c in found if c not in EXCLUDED and runner(c) is None]
    assert not unknown, f"README commands this test cannot run: {unknown}"


def test_the_parser_joins_continuations_and_drops_comments() -> None:
    text = (
        "```sh\n# a comment\nmake demo   # set up\n.venv/bin/x a \\\n    b\n```\n```json\n{}\n```\n"
    )
    assert commands(text) == ["make demo", ".venv/bin/x a b"]


def test_every_readme_command_runs_on_a_fresh_data_root(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    for name in LINKED:
        (work / name).symlink_to(REPO / name)
    session = Session(work)
    ran = []
    for command in commands(README.read_text(encoding="utf-8")):
        if command in EXCLUDED:
            continue
        run = runner(command)
        assert run is not None, command
        run(session, command)
        ran.append(command)
    assert any(c.startswith(".venv/bin/corpus ui") for c in ran)
    assert (work / "corpus-data" / "dagster").is_dir()
