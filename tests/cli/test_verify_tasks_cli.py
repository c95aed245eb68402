"""`corpus verify PATH` on a task snapshot: the arithmetic example's job, verified as
`load_snapshot` does (one `ok:` line, exit 0), and tampered copies (one error line, exit 65)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from corpus_assets.core.errors import DataError
from corpus_assets.tasks import load_snapshot
from corpus_assets.tasks.snapshot import DATA_FILES, MANIFEST, dataset_id_of

CorpusRunner = Callable[..., subprocess.CompletedProcess[str]]

REPO = Path(__file__).resolve().parents[2]
ARITHMETIC = REPO / "examples" / "tasks" / "arithmetic.yaml"


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory, corpus: CorpusRunner) -> tuple[Path, str]:
    """The folder of the example job, run once by `corpus tasks`, and its dataset_id."""
    folder = tmp_path_factory.mktemp("verify") / "job"
    proc = corpus("tasks", "--config", ARITHMETIC, "--output", folder, env={"HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr
    dataset_id: str = json.loads(proc.stdout.strip().splitlines()[-1])["dataset_id"]
    return folder, dataset_id


def copy_of(job: tuple[Path, str], tmp_path: Path) -> Path:
    return Path(shutil.copytree(job[0], tmp_path / "job"))


def change_a_byte(dataset: Path) -> None:
    path = dataset / "train.jsonl"
    data = bytearray(path.read_bytes())
    at = data.index(b'"') + 1
    data[at] = ord("X") if data[at] != ord("X") else ord("Y")
    path.write_bytes(bytes(data))


def swap_references_and_reseal(dataset: Path) -> None:
    """Rows 1 and 2 of references.jsonl swapped, every digest and the dataset_id fixed up."""
    path = dataset / "references.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[0], lines[1] = lines[1], lines[0]
    path.write_bytes(b"".join(lines))
    manifest = json.loads((dataset / MANIFEST).read_bytes())
    for name in DATA_FILES:
        manifest["files"][name]["sha256"] = hashlib.sha256(
            (dataset / name).read_bytes()
        ).hexdigest()
    files = manifest["files"]
    manifest["dataset_id"] = dataset_id_of({n: files[n]["sha256"] for n in DATA_FILES})
    (dataset / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")


def drop_the_manifest(dataset: Path) -> None:
    (dataset / MANIFEST).unlink()


@pytest.mark.parametrize(
    "where", ["job", "job/dataset", "job/dataset/manifest.json"], ids=["job", "dataset", "manifest"]
)
def test_a_snapshot_verifies_in_one_line(
    job: tuple[Path, str], where: str, corpus: CorpusRunner
) -> None:
    folder, dataset_id = job
    out = corpus("verify", folder.parent / where)
    assert out.returncode == 0, out.stderr
    assert out.stdout == (
        f"ok: task snapshot {folder / 'dataset'}: 64 rows, dataset_id {dataset_id}\n"
    )
    assert out.stderr == ""


@pytest.mark.parametrize(
    ("tamper", "expected"),
    [
        (change_a_byte, "train.jsonl sha256 mismatch"),
        (
            swap_references_and_reseal,
            "references.jsonl row 1: task_id",
        ),
        (drop_the_manifest, "manifest.json missing"),
    ],
    ids=["byte", "resealed-misaligned", "no-manifest"],
)
def test_a_tampered_snapshot_is_exit_65_in_one_line(
    job: tuple[Path, str],
    tmp_path: Path,
    corpus: CorpusRunner,
    tamper: Callable[[Path], None],
    expected: str,
) -> None:
    folder = copy_of(job, tmp_path)
    tamper(folder / "dataset")
    with pytest.raises(DataError) as info:
        load_snapshot(folder)
    for where in (folder, folder / "dataset"):
        out = corpus("verify", where)
        assert out.returncode == 65
        assert out.stdout == ""
        assert out.stderr == f"corpus verify: error: {info.value}\n"  # load_snapshot's line
        assert expected in out.stderr


def test_a_job_folder_without_a_snapshot_is_exit_65(
    job: tuple[Path, str], tmp_path: Path, corpus: CorpusRunner
) -> None:
    folder = copy_of(job, tmp_path)
    shutil.rmtree(folder / "dataset")
    out = corpus("verify", folder)
    assert out.returncode == 65
    assert out.stderr == (
        f"corpus verify: error: {folder}: a data job folder with no snapshot "
        "(job.json state: succeeded)\n"
    )
