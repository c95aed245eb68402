"""Where everything lives under the data root (docs/storage.md).

raw/, work/ and logs/ hold documents before PII scrubbing (and pieces of them), so they are
owner-only (0700), as is the Dagster instance folder; published shards and tokens follow the
umask.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from corpus_assets.core.config import LoadedConfig
from corpus_assets.core.errors import ConfigError
from corpus_assets.core.store.atomic import private_dir, tighten

DEFAULT_ROOT = "./corpus-data"
INSTANCE_FOLDERS = ("dagster", "dagster-postgres")
"""The names of a data root's Dagster instance folder (SQLite, PostgreSQL)."""


def default_root() -> Path:
    """The data root when none is given, for the CLI and the Dagster resources alike:
    `$CORPUS_ROOT`, else the folder holding `$DAGSTER_HOME` when that is a root's instance
    folder (`<root>/dagster`, `<root>/dagster-postgres`), else `./corpus-data`."""
    if os.environ.get("CORPUS_ROOT"):
        return Path(os.environ["CORPUS_ROOT"])
    home = os.environ.get("DAGSTER_HOME")
    if home and Path(home).name in INSTANCE_FOLDERS:
        return Path(home).resolve().parent
    return Path(DEFAULT_ROOT)


def check_root(root: Path) -> Path:
    """`root` if it is a writable folder or can be made one; else ConfigError (nothing is left)."""
    path = Path(os.path.abspath(root))
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        what = "is a file" if existing == path else f"{existing} is a file"
        raise ConfigError(f"data root {root}: {what}, not a folder (--root or $CORPUS_ROOT)")
    try:
        _probe(path, existing)
    except OSError as exc:
        problem = "not writable" if existing == path else "cannot be created"
        raise ConfigError(f"data root {root}: {problem} ({exc.strerror or exc})") from None
    tighten_existing(Layout(path))
    return root


def tighten_existing(layout: Layout) -> None:
    """Make the private top folders of a data root owner-only, with what lies directly in them
    (a root made by an older build; a folder a stage's tool made with the umask's mode); what
    lies deeper cannot be reached past them. Creates nothing; a folder this user does not own
    is left as its owner set it."""
    for folder in layout.private_folders:
        with contextlib.suppress(PermissionError, FileNotFoundError, NotADirectoryError):
            tighten(folder)
            for entry in folder.iterdir():
                tighten(entry)


def _probe(path: Path, existing: Path) -> None:
    """Really write where the root is (the permission bits do not bind root), then undo it."""
    if existing == path:
        fd, probe = tempfile.mkstemp(prefix=".corpus-probe-", dir=path)
        os.close(fd)
        os.unlink(probe)
        return
    first_missing = path
    while first_missing.parent != existing:
        first_missing = first_missing.parent
    try:
        first_missing.mkdir()
    except FileExistsError:
        if first_missing.is_dir():
            return  # someone else just made it
        raise
    try:
        os.rmdir(first_missing)
    except OSError as exc:  # a build started at the same moment is filling it, or removed it
        if exc.errno not in (errno.ENOTEMPTY, errno.ENOENT):
            raise


def tokenizer_slug(tokenizer_id: str) -> str:
    """A tokenizer id as one path part (`openai-community/gpt2` -> `openai-community--gpt2`)."""
    return tokenizer_id.replace("/", "--")


@dataclass(frozen=True)
class Layout:
    """Paths of one data root."""

    root: Path

    @property
    def configs(self) -> Path:
        return self.root / "configs"

    @property
    def raw(self) -> Path:
        return self.root / "raw"

    @property
    def work_root(self) -> Path:
        return self.root / "work"

    @property
    def private_folders(self) -> tuple[Path, ...]:
        """The top folders that hold unscrubbed documents or pieces of them: owner-only."""
        return (self.raw, self.work_root, self.logs)

    def secure(self) -> Layout:
        """Create the private top folders owner-only (0700), tightening any that exist."""
        for folder in self.private_folders:
            private_dir(folder)
        return self

    @property
    def ledger(self) -> Path:
        return self.raw / "LEDGER.jsonl"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def run_log(self, run_id: str) -> Path:
        """The full log of one `corpus build` run (its Dagster events and the stages' stderr)."""
        return self.logs / f"{run_id}.log"

    @property
    def dagster_home(self) -> Path:
        return self.root / "dagster"

    @property
    def dagster_postgres_home(self) -> Path:
        """The instance folder when its storage is PostgreSQL (dagster.yaml, compute logs)."""
        return self.root / "dagster-postgres"

    def raw_source(self, source_key: str) -> Path:
        return self.raw / source_key

    def raw_staging(self, source_key: str) -> Path:
        return self.raw / ".staging" / source_key

    def raw_lock(self, source_key: str) -> Path:
        return self.raw / ".locks" / f"{source_key}.lock"

    @property
    def ledger_lock(self) -> Path:
        """The lock of the raw ledger, held while a line is added."""
        return self.raw / ".locks" / "LEDGER.lock"

    def eval_index_lock(self, name: str) -> Path:
        """The lock of the eval index folder `raw/_decontam/<name>`, held while it is built."""
        return self.raw / ".locks" / f"_decontam-{name}.lock"

    def shards(self, cfg: LoadedConfig) -> Path:
        return self.root / "corpus" / cfg.model.dataset / cfg.model.version / cfg.hash12

    def tokens(self, cfg: LoadedConfig) -> Path:
        m = cfg.model
        return (
            self.root
            / "tokens"
            / tokenizer_slug(m.tokenizer.id)
            / m.dataset
            / m.version
            / cfg.hash12
        )

    @property
    def classifiers(self) -> Path:
        return self.root / "classifiers"

    def classifier(self, key: str) -> Path:
        """The folder of one trained quality classifier, by its partition key `<name>-<hash12>`:
        `model.bin` and `MANIFEST.json` (written last)."""
        return self.classifiers / key

    def work(self, cfg: LoadedConfig, stage: str) -> Path:
        return self.work_root / cfg.hash12 / stage

    def stage_lock(self, hash12: str, stage: str) -> Path:
        """The single-flight lock of one stage of one build (`locks.build_lock`); never deleted,
        so that two processes always lock the same file."""
        return self.root / "locks" / hash12 / f"{stage}.lock"

    def config_file(self, cfg: LoadedConfig) -> Path:
        return self.configs / f"{cfg.hash12}.json"
