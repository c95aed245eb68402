"""Ray tasks for nodes that do not see the data root: inputs go with the task, files come back.

With `--ray-shared-root no` a stage's Ray task touches no path of the stage's machine. For each
task the stage process reads what the task reads under the data root (one row group of a raw
part, one band's slice of the LSH index, the task files a shard is cut from, a shard to
tokenize) and sends it with the task; what every task of the stage reads (the boilerplate
lines, the screens' indexes, classifier models, the tokenizer file) goes into Ray's object store
once per stage. On its node the task lays its inputs out in a private temporary folder, one
sub-folder per folder of the stage's, runs the function the local pool runs with its paths moved
there, and sends back the files it wrote, its marker last. The stage process writes them under
the data root with the same names and atomic writes, so a resumed stage, the local pool and a
shared-root Ray all see the same files and markers.

Each task function the stages run on Ray has a `_Route` below: what it reads and writes, and
how its arguments (and a result that names files) move between the two places.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_assets.core.store.atomic import atomic_writer

TASK_PREFIX = "corpus-task-"  # + the worker's pid: a task's private folder on its node
Move = Callable[[Path], Path]


@dataclass(frozen=True)
class Needs:
    """What one task reads and writes under the stage's paths (as the stage process sees them)."""

    files: tuple[Path, ...] = ()
    """Whole files, sent with the task."""
    ranges: tuple[tuple[Path, int, int], ...] = ()
    """(file, offset, length): only these bytes, at that offset of a sparse copy."""
    tables: tuple[tuple[Path, pa.Table], ...] = ()
    """A file to write on the node as one row group of Parquet (a raw part's row group)."""
    shared: tuple[Path, ...] = ()
    """Files or folders every task of the stage reads: into the object store once."""
    outputs: tuple[Path, ...] = ()
    """Folders whose new files come back, in this order."""
    last: tuple[Path, ...] = ()
    """Files written back after all others (completion markers)."""
    args: tuple[Any, ...] = ()
    """The arguments as the stage process sees them (maybe narrowed to what is sent)."""


@dataclass(frozen=True)
class Parcel:
    """One task as sent: the function's route name, its arguments, its inputs' bytes."""

    route: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    folders: tuple[str, ...]
    files: tuple[tuple[str, bytes], ...] = ()
    ranges: tuple[tuple[str, int, bytes], ...] = ()
    tables: tuple[tuple[str, pa.Table], ...] = ()
    shared: tuple[tuple[str, Any], ...] = ()  # (path, object ref of its bytes or folder)
    outputs: tuple[str, ...] = ()
    last: tuple[str, ...] = ()


@dataclass(frozen=True)
class Returned:
    """A task's result (its paths moved back) and the files it wrote, in writing order."""

    result: Any
    files: list[tuple[str, np.ndarray[Any, Any]]] = field(default_factory=list)
    """Each file's bytes as a uint8 array: Ray hands it over without a copy (bytes it copies)."""


class Shipper:
    """The stage process's side: `pack` a task's inputs, `unpack` its files into place."""

    def __init__(self, ray: Any) -> None:
        self.ray = ray
        self.puts: dict[Path, Any] = {}  # shared inputs already in the object store
        self.sent = 0  # bytes of inputs sent to tasks (each shared one counted once)
        self.received = 0  # bytes of files the tasks sent back

    def pack(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Parcel:
        route = route_of(fn)
        needs = ROUTES[route].needs(*args)
        folders: list[Path] = []
        for path in [
            *needs.files,
            *(p for p, _o, _n in needs.ranges),
            *(p for p, _t in needs.tables),
        ]:
            _add(folders, path.parent)
        for path in needs.shared:
            _add(folders, path if path.is_dir() else path.parent)
        for path in needs.outputs:
            _add(folders, path)
        parcel = Parcel(
            route=route,
            fn=fn,
            args=needs.args,
            folders=tuple(str(f) for f in folders),
            files=tuple((str(p), p.read_bytes()) for p in needs.files),
            ranges=tuple((str(p), o, _read_range(p, o, n)) for p, o, n in needs.ranges),
            tables=tuple((str(p), t) for p, t in needs.tables),
            shared=tuple((str(p), self._put(p)) for p in needs.shared),
            outputs=tuple(str(p) for p in needs.outputs),
            last=tuple(str(p) for p in needs.last),
        )
        self.sent += sum(len(d) for _p, d in parcel.files)
        self.sent += sum(len(d) for _p, _o, d in parcel.ranges)
        self.sent += sum(t.nbytes for _p, t in parcel.tables)
        return parcel

    def _put(self, path: Path) -> Any:
        if path not in self.puts:
            if path.is_dir():
                data: Any = {
                    str(p.relative_to(path)): p.read_bytes()
                    for p in sorted(path.rglob("*"))
                    if p.is_file()
                }
            else:
                data = path.read_bytes()
            self.puts[path] = self.ray.put(data)
            self.sent += sum(map(len, data.values())) if isinstance(data, dict) else len(data)
        return self.puts[path]

    def unpack(self, returned: Returned) -> Any:
        """Write the task's files in order, atomically, each folder synced after its last file
        (so a marker never outlives the files it vouches for)."""
        files = [(Path(path), data) for path, data in returned.files]
        self.received += sum(len(data) for _path, data in files)
        for n, (path, data) in enumerate(files):
            last = n == len(files) - 1 or files[n + 1][0].parent != path.parent
            with atomic_writer(path, sync_dir=last) as fh:
                fh.write(data.data)  # the array's buffer: no copy
        return returned.result

    def carried(self) -> str:
        """What went through the object store, for the stage's log."""
        sent, received = self.sent / 1e6, self.received / 1e6
        return f"{sent:,.1f} MB of inputs to tasks, {received:,.1f} MB of files back"


def _add(folders: list[Path], folder: Path) -> None:
    if folder not in folders:
        folders.append(folder)


def _read_range(path: Path, offset: int, length: int) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(offset)
        return fh.read(length)


def shipped(fn: Callable[..., Any]) -> Callable[[Parcel], Returned]:
    """`run_shipped` under `fn`'s name, so Ray's reports (a task failed, is retried) and the
    worker's process title (`ray::run_task`) name the task, as with a shared root."""

    def call(parcel: Parcel) -> Returned:
        return run_shipped(parcel)

    call.__name__, call.__qualname__ = fn.__name__, fn.__qualname__
    return call


def run_shipped(parcel: Parcel) -> Returned:
    """On a Ray worker: lay the inputs out in a private folder, run the task there, return its
    result and the files it wrote."""
    import ray

    with task_folder() as temp:
        mirror = {Path(f): temp / str(i) for i, f in enumerate(parcel.folders)}
        for folder in mirror.values():
            folder.mkdir()

        def moved(path: Path) -> Path:
            return mirror[path] if path in mirror else mirror[path.parent] / path.name

        inputs: set[Path] = set()
        for name, data in parcel.files:
            inputs.add(_write(moved(Path(name)), data))
        for name, offset, data in parcel.ranges:
            with open(moved(Path(name)), "wb") as fh:
                fh.seek(offset)
                fh.write(data)
            inputs.add(moved(Path(name)))
        for name, table in parcel.tables:
            pq.write_table(table, moved(Path(name)), row_group_size=max(1, table.num_rows))
            inputs.add(moved(Path(name)))
        refs = [ref for _name, ref in parcel.shared]
        for (name, _ref), data in zip(parcel.shared, ray.get(refs), strict=True):
            if isinstance(data, dict):
                for rel, content in data.items():
                    inputs.add(_write(moved(Path(name)) / rel, content))
            else:
                inputs.add(_write(moved(Path(name)), data))
        route = ROUTES[parcel.route]
        result = parcel.fn(*route.move(parcel.args, moved))
        home = {m: f for f, m in mirror.items()}

        def back(path: Path) -> Path:
            return home[path] if path in home else home[path.parent] / path.name

        last = [moved(Path(p)) for p in parcel.last]
        written = [
            p
            for o in parcel.outputs
            for p in sorted(moved(Path(o)).iterdir())
            if p.is_file() and p not in inputs and p not in last and not p.name.startswith(".")
        ]
        written += [p for p in last if p.is_file()]
        files = [(str(back(p)), np.fromfile(p, dtype=np.uint8)) for p in written]
        return Returned(route.result(result, back), files)


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@contextmanager
def task_folder() -> Iterator[Path]:
    """A fresh `corpus-task-<pid>-*` folder in this node's temporary folder, removed after;
    first the folders of workers no longer running (a SIGKILLed worker's) are removed."""
    parent = Path(tempfile.gettempdir())
    for folder in parent.glob(f"{TASK_PREFIX}*"):
        owner = folder.name.removeprefix(TASK_PREFIX).partition("-")[0]
        if owner.isdigit() and not _alive(int(owner)):
            shutil.rmtree(folder, ignore_errors=True)
    folder = Path(tempfile.mkdtemp(prefix=f"{TASK_PREFIX}{os.getpid()}-", dir=parent))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def route_of(fn: Callable[..., Any]) -> str:
    route = f"{fn.__module__}.{fn.__qualname__}"
    if route not in ROUTES:
        raise TypeError(f"no route for Ray task {route} without a shared data root")
    return route


@dataclass(frozen=True)
class _Route:
    needs: Callable[..., Needs]
    move: Callable[[tuple[Any, ...], Move], tuple[Any, ...]]
    result: Callable[[Any, Move], Any] = lambda result, _back: result


# The routes: imports inside (the stage modules import the Ray session, which imports this).


def _shard_task_needs(
    cfg: Any, task: Any, task_dir: Path, screens: Any = None, classifiers: tuple[Any, ...] = ()
) -> Needs:
    from corpus_assets.core.stages.screen_index import NO_SCREENS
    from corpus_assets.core.stages.shard_tasks import read_task, task_path
    from corpus_assets.core.text.boilerplate import BOILERPLATE

    screens = NO_SCREENS if screens is None else screens
    shared = [task_dir / BOILERPLATE] if (task_dir / BOILERPLATE).is_file() else []
    shared += [s.folder for s in (*screens.sets, *screens.lists)]
    shared += [c.path for c in classifiers]
    return Needs(
        tables=((task.part, read_task(task)),),
        shared=tuple(shared),
        outputs=(task_dir,),
        last=(task_path(task_dir, task.index, ".done"),),
        args=(cfg, replace(task, row_group=0), task_dir, screens, classifiers),
    )


def _shard_task_move(args: tuple[Any, ...], moved: Move) -> tuple[Any, ...]:
    cfg, task, task_dir, screens, classifiers = args
    screens = replace(
        screens,
        sets=tuple(replace(s, folder=moved(s.folder)) for s in screens.sets),
        lists=tuple(replace(s, folder=moved(s.folder)) for s in screens.lists),
    )
    classifiers = tuple(replace(c, path=moved(c.path)) for c in classifiers)
    return cfg, replace(task, part=moved(task.part)), moved(task_dir), screens, classifiers


def _band_needs(index: Any, band: int) -> Needs:
    n = index.rows
    return Needs(
        ranges=((index.folder / "bands.u64", band * n * 8, n * 8),),
        outputs=(index.folder,),
        args=(index, band),
    )


def _band_move(args: tuple[Any, ...], moved: Move) -> tuple[Any, ...]:
    index, band = args
    return replace(index, folder=moved(index.folder)), band


def _paths_back(result: list[Path], back: Move) -> list[Path]:
    return [back(p) for p in result]


def _write_shard_needs(
    plan: Any, target: int, task_dir: str, staging: str, schema: pa.Schema | None = None
) -> Needs:
    from corpus_assets.core.stages.shard_tasks import task_path

    tasks = sorted({piece.task for piece in plan.pieces})
    extra = () if schema is None else (schema,)
    return Needs(
        files=tuple(task_path(Path(task_dir), t, ".parquet") for t in tasks),
        outputs=(Path(staging),),
        args=(plan, target, task_dir, staging, *extra),
    )


def _write_shard_move(args: tuple[Any, ...], moved: Move) -> tuple[Any, ...]:
    plan, target, task_dir, staging, *rest = args
    return (plan, target, str(moved(Path(task_dir))), str(moved(Path(staging))), *rest)


def _tokenize_needs(task: Any) -> Needs:
    tokenizer = () if task.tokenizer.file is None else (Path(task.tokenizer.file),)
    marker = Path(task.marker)
    return Needs(
        files=(Path(task.shard_path),),
        shared=tokenizer,
        outputs=(Path(task.out_dir), marker.parent),
        last=(marker,),
        args=(task,),
    )


def _tokenize_move(args: tuple[Any, ...], moved: Move) -> tuple[Any, ...]:
    (task,) = args
    tokenizer = task.tokenizer
    if tokenizer.file is not None:
        tokenizer = replace(tokenizer, file=str(moved(Path(tokenizer.file))))
    return (
        replace(
            task,
            shard_path=str(moved(Path(task.shard_path))),
            out_dir=str(moved(Path(task.out_dir))),
            marker=str(moved(Path(task.marker))),
            tokenizer=tokenizer,
        ),
    )


_STAGES = "corpus_assets.core.stages"
ROUTES: dict[str, _Route] = {
    f"{_STAGES}.shard_tasks.run_task": _Route(_shard_task_needs, _shard_task_move),
    f"{_STAGES}.shard_lsh.group_band": _Route(_band_needs, _band_move, _paths_back),
    f"{_STAGES}.shard_write_tasks.write_shard": _Route(_write_shard_needs, _write_shard_move),
    f"{_STAGES}.tokenize_pool.ray_task": _Route(_tokenize_needs, _tokenize_move),
}
