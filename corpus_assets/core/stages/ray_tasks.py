"""Stage tasks as Ray tasks: connect (or start a local Ray), check the data root, map, stop.

With a shared root (the default) every task reads and writes the data root directly, exactly as
a pool worker does, so the root must be one shared POSIX file system mounted at the same path on
every node (NFS, Lustre, EFS). `ray_session` checks that first: it writes a token file under the
stage's work folder and runs one probe task on every live node, pinned to it; a node that does
not read the same token back fails the stage in one line (exit 64) before any task runs.

Without one (`Backend.shared_root` false) there is nothing to check: each task's inputs go with
it through Ray's object store and the files it writes come back to the stage process, which
writes them under the data root (`ray_shipping`); at most WINDOW_PER_CPU tasks per CPU of the
cluster are in flight, so the stage process holds a few tasks' data, never a stage's.

A task whose worker dies, or that raises OSError, TimeoutError or a TransientError, runs again
(up to RETRIES more times); any other error (a DataError: bad data) is raised at once, unwrapped
from Ray's own exception so the CLI maps it to its exit code. Results come back in task order.

Ray is an optional dependency (`pip install 'corpus_assets[ray]'`), imported only here.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import socket
import sys
import tempfile
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, redirect_stdout
from pathlib import Path
from typing import Any

from corpus_assets.core.errors import ConfigError, CorpusError, TransientError
from corpus_assets.core.stages.backend import Backend
from corpus_assets.core.stages.ray_shipping import Shipper, shipped
from corpus_assets.core.store.progress import Progress

RETRIES = 3
RETRY_ON: tuple[type[BaseException], ...] = (OSError, TimeoutError, TransientError)
POLL_S = 1.0
PROBE_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 10.0
LOCAL_OBJECT_STORE_BYTES = 256 << 20  # tasks pass paths and counts (or a window's inputs)
WINDOW_PER_CPU = 2  # tasks in flight per CPU when their inputs and files travel with them
SHARED_ROOT = (
    "the data root must be one shared POSIX file system mounted at the same path on every "
    "Ray node (NFS, Lustre, EFS)"
)
TEMP_PREFIX = "corpus-ray-"  # + the stage's pid
SHORT_TEMP_CHARS = 24  # + /corpus-ray-<pid>/session_<date>_<time>_<pid>/sockets/plasma_store
_AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
_TOKEN = secrets.token_hex(32)  # one per process: Ray may read it once, at import


class RaySession:
    """A connected Ray: `map` runs one task per argument tuple, with retries, in order.

    With a `shipper` (no shared root) each task's inputs travel with it and its files come back
    here, at most WINDOW_PER_CPU tasks per CPU the cluster has (asked again as tasks finish: an
    autoscaled cluster grows) at a time."""

    def __init__(self, ray: Any, progress: Progress, shipper: Shipper | None = None) -> None:
        self.ray = ray
        self.progress = progress
        self.shipper = shipper

    def map(self, fn: Callable[..., Any], args: Sequence[tuple[Any, ...]]) -> Iterator[Any]:
        """`fn(*a)` for each `a` in `args` as Ray tasks; their results in the order of `args`."""
        ray, shipper = self.ray, self.shipper
        remote = ray.remote(fn if shipper is None else shipped(fn)).options(
            name=fn.__name__, num_cpus=1, max_retries=RETRIES, retry_exceptions=list(RETRY_ON)
        )
        todo = iter(args)
        running: deque[Any] = deque()
        done = 0
        try:
            while True:
                window = len(args) if shipper is None else WINDOW_PER_CPU * max(1, _cpus(ray))
                while len(running) < window and (a := next(todo, None)) is not None:
                    running.append(
                        remote.remote(*a) if shipper is None else remote.remote(shipper.pack(fn, a))
                    )
                if not running:
                    return
                while not ray.wait([running[0]], timeout=POLL_S)[0]:
                    self.progress.beat(f"Ray tasks: {done:,} of {len(args):,} done")
                result = self._get(running.popleft())
                yield result if shipper is None else shipper.unpack(result)
                done += 1
        finally:  # a failed (or abandoned) map leaves nothing running on the cluster
            for ref in running:
                ray.cancel(ref, force=True)

    def _get(self, ref: Any) -> Any:
        exceptions = self.ray.exceptions
        try:
            return self.ray.get(ref)
        except exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, Exception):
                raise cause from None
            raise CorpusError(f"a Ray task failed: {_first_line(exc)}") from None
        except (exceptions.WorkerCrashedError, exceptions.NodeDiedError) as exc:
            raise CorpusError(
                f"a Ray task's worker died {RETRIES + 1} times ({_first_line(exc)}); "
                "run the stage again"
            ) from None
        except exceptions.RayError as exc:  # lost objects, out of memory, cancelled...
            raise CorpusError(f"a Ray task failed: {_first_line(exc)}") from None


@contextmanager
def ray_session(
    backend: Backend, workers: int, probe_dir: Path, progress: Progress
) -> Iterator[RaySession]:
    """Connect to `backend.ray_address`, or start a local Ray of `workers` CPUs (stopped on
    exit, its temporary folder removed); with a shared root, check every node sees
    `probe_dir`, else send each task its inputs (`ray_shipping`)."""
    local = backend.ray_address is None
    if local:
        _keep_home_clean()
    ray = _import_ray()
    temp = _local_temp() if local else None
    # Ray prints what its raylets report (a worker died, a task is retried) on stdout, which
    # holds the stage's JSON result: send those lines to stderr with the stage's progress.
    try:
        with redirect_stdout(sys.stderr):
            _connect(ray, backend, workers, temp)
            try:
                where = "a local Ray" if local else f"Ray at {backend.ray_address}"
                cpus = _cpus(ray)
                if backend.shared_root:
                    progress.note(f"running tasks on {where} ({cpus} CPUs)")
                    check_shared_root(ray, probe_dir)
                    yield RaySession(ray, progress)
                else:
                    progress.note(
                        f"running tasks on {where} ({cpus} CPUs), no shared root: inputs and "
                        "files travel through Ray's object store"
                    )
                    shipper = Shipper(ray)
                    try:
                        yield RaySession(ray, progress, shipper)
                    finally:
                        progress.note(f"Ray's object store carried {shipper.carried()}")
            finally:
                ray.shutdown()
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)


@contextmanager
def ray_or_local(
    backend: Backend, workers: int, probe_dir: Path, progress: Progress
) -> Iterator[RaySession | None]:
    """For a `ray` backend, a session that connects (or starts Ray) at its first `map` and
    stops on exit, so a stage that fails its checks or is already built never starts Ray;
    else None (the caller's local pool)."""
    if not backend.is_ray:
        yield None
        return
    with ExitStack() as stack:
        yield _LazySession(stack, backend, workers, probe_dir, progress)


class _LazySession(RaySession):
    def __init__(
        self, stack: ExitStack, backend: Backend, workers: int, probe_dir: Path, progress: Progress
    ) -> None:
        super().__init__(None, progress)
        self.stack = stack
        self.settings = (backend, workers, probe_dir, progress)

    def map(self, fn: Callable[..., Any], args: Sequence[tuple[Any, ...]]) -> Iterator[Any]:
        if not args:
            return iter(())
        if self.ray is None:
            session = self.stack.enter_context(ray_session(*self.settings))
            self.ray, self.shipper = session.ray, session.shipper
        return super().map(fn, args)


def _local_temp() -> Path:
    """A fresh folder for a local Ray, `corpus-ray-<this pid>`. First the folders of stages that
    died without removing theirs (a SIGKILL: their Ray went with them) are removed."""
    parent = Path(_short_temp())
    for folder in parent.glob(f"{TEMP_PREFIX}*"):
        owner = folder.name.removeprefix(TEMP_PREFIX).partition("-")[0]
        if owner.isdigit() and (int(owner) == os.getpid() or not _alive(int(owner))):
            shutil.rmtree(folder, ignore_errors=True)
    folder = parent / f"{TEMP_PREFIX}{os.getpid()}"
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:  # not ours to remove: a name nobody else can predict
        return Path(tempfile.mkdtemp(prefix=f"{folder.name}-", dir=parent))
    return folder


def _alive(pid: int) -> bool:
    """A process `pid` exists (another user's counts: its folder is not ours to remove)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _short_temp() -> str:
    """The temporary folder, unless it is too long for Ray's sockets (107 bytes): then /tmp."""
    temp = tempfile.gettempdir()
    return temp if len(temp) <= SHORT_TEMP_CHARS else "/tmp"


def _keep_home_clean() -> None:
    """A local Ray with token auth reads the token from the environment rather than creating
    ~/.ray/auth_token; no usage statistics either. Settings the user made are kept."""
    if not any(os.environ.get(name) for name in _AUTH_VARS):
        os.environ["RAY_AUTH_MODE"] = "token"
        os.environ["RAY_AUTH_TOKEN"] = _TOKEN
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError("--backend ray needs Ray: pip install 'corpus_assets[ray]'") from None
    return ray


def _connect(ray: Any, backend: Backend, workers: int, temp: Path | None) -> None:
    quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
    try:
        if temp is None:
            _reachable(str(backend.ray_address))
            ray.init(address=backend.ray_address, **quiet)
        else:
            ray.init(
                num_cpus=workers,
                include_dashboard=False,
                object_store_memory=LOCAL_OBJECT_STORE_BYTES,
                _temp_dir=str(temp),
                **quiet,
            )
    except (ConnectionError, TimeoutError) as exc:
        raise TransientError(
            f"cannot connect to Ray at {backend.ray_address}: {_first_line(exc)}"
        ) from None


def _reachable(address: str) -> None:
    """A HOST:PORT address answers on TCP (Ray itself would wait for minutes); other forms
    (`auto`, `ray://...`) are left to Ray."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise TransientError(
            f"cannot connect to Ray at {address}: {exc.strerror or exc}; is the cluster's head "
            "running there (`ray start --head`)?"
        ) from None


def _cpus(ray: Any) -> int:
    return int(ray.cluster_resources().get("CPU", 0))


def check_shared_root(ray: Any, probe_dir: Path) -> None:
    """Every live node reads back a fresh token written under `probe_dir`, else ConfigError."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe_dir.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(16)
    path = probe_dir / f".ray-probe-{token}"
    path.write_text(token, encoding="utf-8")
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        probe = ray.remote(_read_token)
        refs = {
            n["NodeID"]: probe.options(
                num_cpus=0,
                max_retries=1,
                scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
            ).remote(str(path))
            for n in nodes
        }
        try:
            answers = ray.get(list(refs.values()), timeout=PROBE_TIMEOUT_S)
            seen = dict(zip(refs, answers, strict=True))
        except ray.exceptions.GetTimeoutError:
            raise TransientError(
                f"Ray nodes did not answer the data-root probe in {PROBE_TIMEOUT_S:.0f} s"
            ) from None
    finally:
        path.unlink(missing_ok=True)
    blind = [(n, seen[n["NodeID"]]) for n in nodes if seen[n["NodeID"]] != token]
    if blind:
        node, what = blind[0]
        more = f" (and {len(blind) - 1} more nodes)" if len(blind) > 1 else ""
        raise ConfigError(
            f"Ray node {node.get('NodeManagerAddress', '?')} ({node['NodeID'][:12]}){more} "
            f"cannot see the data root: {what}; {SHARED_ROOT}"
        )


def _read_token(path: str) -> str:
    """On one node: the token file's text, or what went wrong reading it."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        return f"{path}: {exc.strerror or type(exc).__name__}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
