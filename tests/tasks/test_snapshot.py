"""Snapshots: canonical rows, write → load round trip, content identity, owner-only files,
every kind of tampering caught by `load_snapshot`, and the Hugging Face export. Real files only."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corpus_assets.core.errors import EXIT_DATA, ConfigError, DataError
from corpus_assets.core.store.atomic import dump_json
from corpus_assets.tasks.export import export_hf_dataset
from corpus_assets.tasks.files import jsonl_line, private_dir, write_private
from corpus_assets.tasks.snapshot import (
    DATA_FILES,
    MANIFEST,
    Snapshot,
    dataset_id_of,
    load_snapshot,
    write_snapshot,
)
from corpus_assets.tasks.types import DataSample, PublicTask

REPORT = {"generated": 7, "selected": 5, "note": "naïve"}
PROVENANCE = {"config": {"seed": 0}, "code": {"recipe": "abc"}}


def samples(n: int = 5) -> list[DataSample]:
    """`n` samples with unicode inputs and references."""
    return [
        DataSample(PublicTask(f"t{i}", {"q": f"{i} + 1 = ? é"}, {"family": "add"}), {"a": i + 1})
        for i in range(n)
    ]


def triples(n: int = 5) -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """(public, reference, train) rows as the executor projects them."""
    return [
        (
            s.task.to_json(),
            {"task_id": s.task_id, "reference": s.reference},
            {"task_id": s.task_id, "prompt": s.task.input["q"], "answer": str(s.reference["a"])},
        )
        for s in samples(n)
    ]


def probe_rows() -> list[dict[str, Any]]:
    return [
        {"task_id": t, "repeat": r, "response": "x", "failure_reason": None, "score": 0.5}
        for t in ("t0", "t2")
        for r in (0, 1)
    ]


def make(
    root: Path,
    name: str = "dataset",
    rows: list[Any] | None = None,
    probes: list[dict[str, Any]] | None = None,
    provenance: dict[str, Any] | None = None,
) -> Path:
    """Write a snapshot at `root/name` (staging beside it); its path."""
    root.mkdir(parents=True, exist_ok=True)
    final = root / name
    write_snapshot(
        root / f".{name}.staging",
        final,
        iter(triples() if rows is None else rows),
        iter(probe_rows() if probes is None else probes),
        REPORT,
        PROVENANCE if provenance is None else provenance,
    )
    return final


def reseal(folder: Path) -> None:
    """Recompute every digest, size, row count and the dataset_id, as a careful forger would."""
    manifest = json.loads((folder / MANIFEST).read_bytes())
    for name in DATA_FILES:
        data = (folder / name).read_bytes()
        entry = manifest["files"][name]
        entry["sha256"] = hashlib.sha256(data).hexdigest()
        entry["bytes"] = len(data)
        if "rows" in entry:
            entry["rows"] = data.count(b"\n")
    manifest["rows"] = manifest["files"]["public.jsonl"]["rows"]
    digests = {n: manifest["files"][n]["sha256"] for n in DATA_FILES}
    manifest["dataset_id"] = dataset_id_of(digests)
    write_private(folder / MANIFEST, dump_json(manifest))


def rewrite_lines(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(lines))


def data_error(folder: Path) -> str:
    with pytest.raises(DataError) as info:
        load_snapshot(folder)
    assert info.value.exit_code == EXIT_DATA
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.fixture
def umask() -> Iterator[None]:
    """Restore the process umask after a test changes it."""
    old = os.umask(0o022)
    os.umask(old)
    yield
    os.umask(old)


# --- canonical rows ---------------------------------------------------------------------------


def test_jsonl_line_is_sorted_compact_unescaped_utf8() -> None:
    line = jsonl_line({"b": [1, 2.5], "a": "é ☃", "c": {"z": None, "y": True}})
    assert line == '{"a":"é ☃","b":[1,2.5],"c":{"y":true,"z":null}}\n'.encode()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_jsonl_line_refuses_non_finite_numbers(bad: float) -> None:
    with pytest.raises(ValueError):
        jsonl_line({"score": bad})


# --- write and load ---------------------------------------------------------------------------


def test_write_then_load_round_trips(tmp_path: Path) -> None:
    final = make(tmp_path)
    snap = load_snapshot(final)
    assert snap.path == final
    assert snap.rows == 5
    assert list(snap.public_tasks()) == [s.task for s in samples()]
    assert list(snap.references()) == [r for _, r, _ in triples()]
    assert list(snap.training_rows()) == [t for _, _, t in triples()]
    assert list(snap.probes()) == probe_rows()
    assert snap.report == REPORT
    assert snap.manifest["config"] == {"seed": 0}
    assert snap.manifest["format"] == 1
    assert snap.manifest["files"]["public.jsonl"]["rows"] == 5
    assert snap.manifest["files"]["probes.jsonl"]["rows"] == 4
    assert "rows" not in snap.manifest["files"]["report.json"]
    public = (final / "public.jsonl").read_bytes().splitlines(keepends=True)
    assert public == [jsonl_line(p) for p, _, _ in triples()]
    assert sorted(p.name for p in final.iterdir()) == sorted([*DATA_FILES, MANIFEST])


def test_write_returns_the_manifest_it_wrote(tmp_path: Path) -> None:
    root = tmp_path / "job"
    root.mkdir()
    manifest = write_snapshot(root / ".s", root / "dataset", triples(), [], REPORT, PROVENANCE)
    assert json.loads((root / "dataset" / MANIFEST).read_bytes()) == manifest
    assert (root / "dataset" / "probes.jsonl").read_bytes() == b""


def test_load_accepts_the_job_folder(tmp_path: Path) -> None:
    final = make(tmp_path / "job")
    assert load_snapshot(str(tmp_path / "job")).path == final


def test_dataset_id_ignores_folder_and_provenance_but_not_content(tmp_path: Path) -> None:
    one = load_snapshot(make(tmp_path / "a"))
    two = load_snapshot(make(tmp_path / "b", "other", provenance={"config": {"seed": 9}}))
    assert one.dataset_id == two.dataset_id
    assert one.manifest != two.manifest
    rows = triples()
    rows[3][2]["answer"] = "5"  # was "4": one byte of train.jsonl
    three = load_snapshot(make(tmp_path / "c", rows=rows))
    assert three.dataset_id != one.dataset_id
    assert three.manifest["files"]["public.jsonl"] == one.manifest["files"]["public.jsonl"]


def test_dataset_id_needs_all_five_files() -> None:
    digests = dict.fromkeys(DATA_FILES, "0" * 64)
    assert dataset_id_of({**digests, "extra": "1"}) == dataset_id_of(digests)
    del digests["report.json"]
    with pytest.raises(ValueError, match=r"report\.json"):
        dataset_id_of(digests)


@pytest.mark.parametrize("mask", [0o022, 0o277, 0o000])
def test_every_folder_is_0700_and_file_0600_whatever_the_umask(
    tmp_path: Path, umask: None, mask: int
) -> None:
    (tmp_path / "job").mkdir()  # a usable parent even under umask 0o277
    os.umask(mask)
    final = make(tmp_path / "job")
    os.umask(0o022)
    assert stat.S_IMODE(final.stat().st_mode) == 0o700
    for path in final.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name


def test_private_dir_tightens_an_existing_folder(tmp_path: Path) -> None:
    folder = tmp_path / "open"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    assert private_dir(folder) == folder
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_staging_leftovers_are_removed(tmp_path: Path) -> None:
    staging = tmp_path / ".dataset.staging"
    staging.mkdir()
    (staging / "public.jsonl").write_bytes(b"half a row")
    (staging / "junk").write_bytes(b"x")
    final = make(tmp_path)
    assert not staging.exists()
    assert not (final / "junk").exists()
    assert load_snapshot(final).rows == 5


@pytest.mark.parametrize("contents", [{}, {"keep.txt": b"mine"}])
def test_an_existing_final_folder_is_refused_and_untouched(
    tmp_path: Path, contents: dict[str, bytes]
) -> None:
    final = tmp_path / "dataset"
    final.mkdir()
    for name, data in contents.items():
        (final / name).write_bytes(data)
    with pytest.raises(ConfigError, match="already exists"):
        make(tmp_path)
    assert {p.name: p.read_bytes() for p in final.iterdir()} == contents


def test_a_misaligned_triple_is_refused_at_write(tmp_path: Path) -> None:
    rows = triples()
    rows[2] = (rows[2][0], {"task_id": "t9", "reference": 1}, rows[2][2])
    with pytest.raises(ValueError, match=r"references\.jsonl row 3: task_id 't9' .* 't2'"):
        make(tmp_path, rows=rows)
    assert not (tmp_path / "dataset").exists()


def test_a_train_row_with_another_id_is_refused_at_write(tmp_path: Path) -> None:
    rows = triples()
    rows[0][2]["task_id"] = "t1"
    with pytest.raises(ValueError, match=r"train\.jsonl row 1"):
        make(tmp_path, rows=rows)


def test_a_train_row_without_task_id_is_fine(tmp_path: Path) -> None:
    rows = [(p, r, {"text": p["input"]["q"]}) for p, r, _ in triples()]
    assert load_snapshot(make(tmp_path, rows=rows)).rows == 5


def test_duplicate_ids_and_stray_probes_are_refused_at_write(tmp_path: Path) -> None:
    rows = triples()
    rows[4] = rows[0]
    with pytest.raises(ValueError, match=r"public\.jsonl row 5: duplicate task_id 't0'"):
        make(tmp_path / "a", rows=rows)
    stray = [{"task_id": "nope", "repeat": 0}]
    with pytest.raises(ValueError, match=r"probes\.jsonl row 1: task_id 'nope'"):
        make(tmp_path / "b", probes=stray)
    backwards = [{"task_id": "t2", "repeat": 0}, {"task_id": "t0", "repeat": 0}]
    with pytest.raises(ValueError, match=r"probes\.jsonl row 2: out of order"):
        make(tmp_path / "c", probes=backwards)


def test_reserved_provenance_keys_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="dataset_id"):
        make(tmp_path, provenance={"dataset_id": "mine"})


# --- tampering --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", DATA_FILES)
def test_one_changed_byte_in_any_data_file_is_caught(tmp_path: Path, name: str) -> None:
    final = make(tmp_path)
    path = final / name
    data = bytearray(path.read_bytes())
    at = data.index(b'"') + 1  # the first letter of the first key
    data[at] = ord("X") if data[at] != ord("X") else ord("Y")
    path.write_bytes(bytes(data))
    message = data_error(final)
    assert f"{name} sha256 mismatch" in message
    assert str(final) in message


def test_a_fixed_digest_with_a_stale_dataset_id_is_caught(tmp_path: Path) -> None:
    final = make(tmp_path)
    path = final / "train.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"answer":"3"', b'"answer":"4"'))
    manifest = json.loads((final / MANIFEST).read_bytes())
    manifest["files"]["train.jsonl"]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (final / MANIFEST).write_bytes(dump_json(manifest))
    assert "dataset_id mismatch" in data_error(final)


def test_swapped_reference_lines_are_caught_even_when_resealed(tmp_path: Path) -> None:
    final = make(tmp_path)
    lines = (final / "references.jsonl").read_bytes().splitlines(keepends=True)
    lines[1], lines[2] = lines[2], lines[1]
    rewrite_lines(final / "references.jsonl", lines)
    reseal(final)
    message = data_error(final)
    assert "references.jsonl row 2: task_id 't2' does not match public.jsonl 't1'" in message


def test_a_train_row_with_the_wrong_id_is_caught(tmp_path: Path) -> None:
    final = make(tmp_path)
    lines = (final / "train.jsonl").read_bytes().splitlines(keepends=True)
    lines[3] = jsonl_line({"task_id": "t0", "prompt": "p", "answer": "4"})
    rewrite_lines(final / "train.jsonl", lines)
    reseal(final)
    assert "train.jsonl row 4: task_id 't0' does not match public.jsonl 't3'" in data_error(final)


def test_duplicate_public_ids_are_caught(tmp_path: Path) -> None:
    final = make(tmp_path, probes=[])
    for name in ("public.jsonl", "references.jsonl", "train.jsonl"):
        lines = (final / name).read_bytes().splitlines(keepends=True)
        rewrite_lines(final / name, [*lines[:4], lines[0]])
    reseal(final)
    assert "public.jsonl row 5: duplicate task_id 't0' (row 1)" in data_error(final)


def test_disordered_probes_are_caught(tmp_path: Path) -> None:
    final = make(tmp_path)
    lines = (final / "probes.jsonl").read_bytes().splitlines(keepends=True)
    rewrite_lines(final / "probes.jsonl", [lines[2], *lines[:2], lines[3]])
    reseal(final)
    assert "probes.jsonl row 2: out of order" in data_error(final)


def test_a_row_count_that_disagrees_with_the_manifest_is_caught(tmp_path: Path) -> None:
    final = make(tmp_path)
    for name in ("public.jsonl", "references.jsonl", "train.jsonl"):
        lines = (final / name).read_bytes().splitlines(keepends=True)
        rewrite_lines(final / name, lines[:4])
    reseal(final)
    manifest = json.loads((final / MANIFEST).read_bytes())
    manifest["rows"] = 5
    (final / MANIFEST).write_bytes(dump_json(manifest))
    assert "public.jsonl has 4 rows, manifest says 5" in data_error(final)


def test_an_unknown_file_is_caught_but_dotfiles_are_ignored(tmp_path: Path) -> None:
    final = make(tmp_path)
    (final / ".nfs0001").write_bytes(b"")
    assert load_snapshot(final).rows == 5
    (final / "answers.txt").write_bytes(b"42")
    assert "unexpected file answers.txt" in data_error(final)


def test_a_missing_data_file_is_caught(tmp_path: Path) -> None:
    final = make(tmp_path)
    (final / "probes.jsonl").unlink()
    assert "probes.jsonl missing" in data_error(final)


def test_a_missing_manifest_or_folder_is_caught(tmp_path: Path) -> None:
    final = make(tmp_path)
    (final / MANIFEST).unlink()
    assert f"snapshot {final}: manifest.json missing" in data_error(final)
    assert f"snapshot {tmp_path / 'nowhere'}: no such folder" in data_error(tmp_path / "nowhere")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"format": 2}, "unknown format 2; allowed: 1"),
        ({"files": {}}, "files must list"),
        ({"dataset_id": 7}, "string 'dataset_id'"),
    ],
)
def test_a_bad_manifest_is_caught(tmp_path: Path, change: dict[str, Any], expected: str) -> None:
    final = make(tmp_path)
    manifest = json.loads((final / MANIFEST).read_bytes())
    (final / MANIFEST).write_bytes(dump_json({**manifest, **change}))
    assert expected in data_error(final)


def test_an_unparseable_manifest_is_caught(tmp_path: Path) -> None:
    final = make(tmp_path)
    (final / MANIFEST).write_bytes(b"{truncated")
    assert "manifest.json line 1: not JSON" in data_error(final)


def test_a_bad_json_line_is_caught_with_its_line_number(tmp_path: Path) -> None:
    final = make(tmp_path)
    lines = (final / "train.jsonl").read_bytes().splitlines(keepends=True)
    lines[1] = b'{"task_id": "t1",\n'
    rewrite_lines(final / "train.jsonl", lines)
    reseal(final)
    assert "train.jsonl line 2: not JSON" in data_error(final)


# --- training_rows() verifies again ----------------------------------------------------------


def test_training_rows_is_a_list_of_the_train_rows(tmp_path: Path) -> None:
    rows = load_snapshot(make(tmp_path)).training_rows()
    assert isinstance(rows, list)
    assert len(rows) == 5
    assert rows == [t for _, _, t in triples()]


@pytest.mark.parametrize("name", DATA_FILES)
def test_training_rows_catch_a_file_changed_after_loading(tmp_path: Path, name: str) -> None:
    final = make(tmp_path)
    snap = load_snapshot(final)
    path = final / name
    data = bytearray(path.read_bytes())
    at = data.index(b'"') + 1
    data[at] = ord("X") if data[at] != ord("X") else ord("Y")
    path.write_bytes(bytes(data))
    with pytest.raises(DataError) as info:
        snap.training_rows()
    assert str(info.value) == data_error(final)  # the very line load_snapshot gives
    assert f"{name} sha256 mismatch" in str(info.value)


def test_training_rows_catch_an_edited_row_after_loading(tmp_path: Path) -> None:
    final = make(tmp_path)
    snap = load_snapshot(final)
    path = final / "train.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"answer":"3"', b'"answer":"4"'))
    with pytest.raises(DataError) as info:
        snap.training_rows()
    assert str(info.value) == data_error(final)


def test_training_rows_check_the_manifest_they_were_loaded_with(tmp_path: Path) -> None:
    """A folder resealed after loading is another dataset: its rows are not this snapshot's."""
    final = make(tmp_path)
    snap = load_snapshot(final)
    path = final / "train.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"answer":"3"', b'"answer":"4"'))
    reseal(final)
    assert load_snapshot(final).dataset_id != snap.dataset_id
    with pytest.raises(DataError, match=r"train\.jsonl sha256 mismatch"):
        snap.training_rows()


# --- Hugging Face export ----------------------------------------------------------------------


@pytest.fixture
def hf_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))


def test_export_writes_a_dataset_load_from_disk_reads(tmp_path: Path, hf_env: None) -> None:
    import datasets

    final = make(tmp_path / "job")
    snap = load_snapshot(final)
    dest = export_hf_dataset(snap, tmp_path / "hf" / "train")
    assert dest == (tmp_path / "hf" / "train").absolute()
    loaded = datasets.load_from_disk(str(dest))
    assert len(loaded) == 5
    assert loaded[3] == triples()[3][2]
    source = json.loads((dest / "corpus_source.json").read_bytes())
    assert source == {
        "kind": "task_snapshot",
        "dataset_id": snap.dataset_id,
        "snapshot_path": str(final.absolute()),
        "rows": 5,
    }
    assert [p.name for p in (tmp_path / "hf").iterdir()] == ["train"]  # no staging left
    for path in [dest, *dest.rglob("*")]:
        want = 0o700 if path.is_dir() else 0o600
        assert stat.S_IMODE(path.stat().st_mode) == want, path


def test_export_accepts_a_path(tmp_path: Path, hf_env: None) -> None:
    make(tmp_path / "job")
    dest = export_hf_dataset(str(tmp_path / "job"), str(tmp_path / "out"))
    assert json.loads((dest / "corpus_source.json").read_bytes())["rows"] == 5


def test_export_refuses_an_existing_dest(tmp_path: Path, hf_env: None) -> None:
    final = make(tmp_path / "job")
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "mine").write_bytes(b"keep")
    with pytest.raises(ConfigError, match="already exists; choose a new folder"):
        export_hf_dataset(final, dest)
    assert [p.name for p in dest.iterdir()] == ["mine"]
    assert (dest / "mine").read_bytes() == b"keep"


def test_export_reverifies_a_snapshot_object(tmp_path: Path, hf_env: None) -> None:
    final = make(tmp_path / "job")
    snap = load_snapshot(final)
    path = final / "train.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"answer":"2"', b'"answer":"9"'))
    for given in (snap, Snapshot(final, snap.manifest), final):
        with pytest.raises(DataError, match=r"train\.jsonl sha256 mismatch"):
            export_hf_dataset(given, tmp_path / "out")
    assert not [p for p in tmp_path.iterdir() if "out" in p.name]  # no dest, no staging
