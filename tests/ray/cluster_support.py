"""A throwaway Ray cluster on this machine: `ray start --head`, and nodes that may be blind.

Every process is started in a session of its own and stopped by its process group (and the
workers it forked, found by ancestry), never with `ray stop`, which would stop every Ray on
the machine. A blind node runs in a mount namespace of its own (`unshare -m`, root only) with
an empty tmpfs mounted over the data root: a node that cannot see the root.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from support.processes import descendants
from support.servers import free_port

RAY = str(Path(sys.executable).with_name("ray"))
START_TIMEOUT_S = 120.0


def can_unshare_mounts() -> bool:
    try:
        return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0
    except OSError:
        return False


class LocalCluster:
    """A head of `cpus` CPUs at `address`; `add_blind_node(root)` adds a node blind to root."""

    def __init__(self, env: dict[str, str], cpus: int) -> None:
        self.env = env
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.temps: list[Path] = []
        self.procs: list[subprocess.Popen[bytes]] = []
        self._start(
            [RAY, "start", "--head", f"--port={self.port}", "--include-dashboard=false"], cpus
        )
        self._wait_for_nodes(1)
        self.nodes = 1

    def _start(self, argv: list[str], cpus: int, shell_prefix: str | None = None) -> None:
        temp = Path(tempfile.mkdtemp(prefix="rc", dir="/tmp"))
        self.temps.append(temp)
        args = [*argv, f"--num-cpus={cpus}", f"--temp-dir={temp}", "--disable-usage-stats"]
        args += ["--node-ip-address=127.0.0.1", "--block"]
        command = args
        if shell_prefix is not None:
            command = ["unshare", "-m", "sh", "-c", f"{shell_prefix} {shlex.join(args)}"]
        self.procs.append(
            subprocess.Popen(
                command,
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )

    def add_blind_node(self, root: Path) -> None:
        """A node in its own mount namespace, with an empty tmpfs over `root`."""
        root.mkdir(parents=True, exist_ok=True)
        mount = f"mount -t tmpfs tmpfs {shlex.quote(str(root))} && exec"
        self._start([RAY, "start", f"--address={self.address}"], 1, shell_prefix=mount)
        self.nodes += 1
        self._wait_for_nodes(self.nodes)

    def _wait_for_nodes(self, n: int) -> None:
        code = (
            "import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); "
            "print(sum(1 for x in ray.nodes() if x['Alive']))"
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            for proc in self.procs:
                assert proc.poll() is None, f"a ray start process exited {proc.returncode}"
            probe = subprocess.run(
                [sys.executable, "-c", code, self.address],
                env=self.env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            if probe.returncode == 0 and int(probe.stdout.split()[-1]) >= n:
                return
            time.sleep(1.0)
        raise AssertionError(f"the test's Ray cluster did not reach {n} nodes")

    def stop(self) -> None:
        pids = {p.pid for p in self.procs}
        pids |= {d for p in self.procs for d in descendants(p.pid)}
        for proc in self.procs:
            _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(p.poll() is None for p in self.procs):
            time.sleep(0.2)
        for proc in self.procs:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
        for pid in pids:  # workers in sessions of their own, if they outlived their raylet
            try:
                if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::"):
                    os.kill(pid, signal.SIGKILL)
            except (OSError, ProcessLookupError):
                pass
        for temp in self.temps:
            shutil.rmtree(temp, ignore_errors=True)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)
