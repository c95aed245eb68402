"""`corpus report` on a real tiny build: files, the numbers behind the plots, refusals."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from support.corpus import run_corpus

from corpus_assets.core.text.normalize import normalize

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "examples" / "tiny.toml"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PLOTS = ["report_lengths.png", "report_drops.png", "report_duplicates.png", "report_pii.png"]
TOKENS_PLOT = "report_tokens.png"
REPORT_FILES = [*PLOTS, TOKENS_PLOT, "report.json", "REPORT.md"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data root holding the tiny example's raw cache, shards and tokens (no report yet)."""
    root = tmp_path_factory.mktemp("report") / "root"
    for stage in ("fetch", "shard", "tokenize"):
        proc = run_corpus("run", "--stage", stage, "--config", TINY, "--root", root)
        assert proc.returncode == 0, proc.stderr
    return root


def shards_of(root: Path) -> Path:
    (folder,) = (root / "corpus" / "tiny-stories" / "v1").iterdir()
    return folder


def tokens_of(root: Path) -> Path:
    (folder,) = (root / "tokens" / "bytes" / "tiny-stories" / "v1").iterdir()
    return folder


def fresh_copy(built: Path, tmp_path: Path) -> Path:
    """A copy of the built root without report files (a relocated root must work too)."""
    root = tmp_path / "root"
    shutil.copytree(built, root)
    for name in REPORT_FILES:
        (shards_of(root) / name).unlink(missing_ok=True)
    return root


def report(path: Path) -> dict[str, Any]:
    proc = run_corpus("report", path)
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.splitlines()
    return dict(json.loads(line))


def manifest(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / "_MANIFEST.json").read_text(encoding="utf-8")))


def test_report_writes_the_markdown_and_valid_plots(built: Path, tmp_path: Path) -> None:
    root = fresh_copy(built, tmp_path)
    folder = shards_of(root)
    printed = report(folder)
    assert printed["files"] == [str(folder / name) for name in REPORT_FILES]
    assert printed["report"] == str(folder / "REPORT.md")
    m = manifest(folder)
    assert (printed["documents_in"], printed["documents_out"]) == (321, 300)
    assert printed["tokens"] == manifest(tokens_of(root))["totals"]["tokens"]
    for name in [*PLOTS, TOKENS_PLOT]:
        data = (folder / name).read_bytes()
        assert data.startswith(PNG_MAGIC), name
        assert len(data) > 5_000, name
        assert b"Software" not in data  # no matplotlib version stamp in the file
    text = (folder / "REPORT.md").read_text(encoding="utf-8")
    assert text.startswith(f"# Build report: tiny-stories v1 ({m['build_id']})\n")
    assert "```json\n" in text and '"target_mb": 0.05' in text
    for name in [*PLOTS, TOKENS_PLOT]:
        assert f"]({name})" in text
    assert text.count("How to read this:") == 5
    assert "| text in | 123.5 KiB |" in text
    # the report is outside the manifests: both builds still verify, manifests unchanged
    for built_folder in (folder, tokens_of(root)):
        assert run_corpus("verify", built_folder).returncode == 0
    assert (folder / "_MANIFEST.json").read_bytes() == (
        shards_of(built) / "_MANIFEST.json"
    ).read_bytes()


def test_the_numbers_behind_the_plots_match_the_build(built: Path, tmp_path: Path) -> None:
    root = fresh_copy(built, tmp_path)
    folder = shards_of(root)
    report(folder / "_MANIFEST.json")
    numbers = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    m = manifest(folder)
    lengths = numbers["lengths"]
    assert lengths["unit"] == "characters"
    edges = np.array(lengths["edges"])

    texts = [t for s in m["shards"] for t in pq.read_table(folder / s["name"])["text"].to_pylist()]
    after = np.array([len(t) for t in texts])
    assert sum(lengths["after"]["counts"]) == lengths["after"]["documents"] == m["documents_out"]
    assert lengths["after"]["counts"] == np.histogram(after, bins=edges)[0].tolist()
    assert lengths["after"]["total"] == int(after.sum())
    assert (lengths["after"]["min"], lengths["after"]["max"]) == (after.min(), after.max())

    raw_texts = []
    for source in m["sources"]:
        for f in source["files"]:
            raw_texts += pq.read_table(root / "raw" / source["source_key"] / f["name"])[
                "text"
            ].to_pylist()
    before = np.array([len(normalize(t)) for t in raw_texts])
    assert sum(lengths["before"]["counts"]) == m["documents_in"] == len(raw_texts)
    assert lengths["before"]["counts"] == np.histogram(before, bins=edges)[0].tolist()
    assert lengths["before"]["total"] == int(before.sum())

    assert numbers["dropped"] == m["dropped"] and sum(m["dropped"].values()) == 4
    assert numbers["duplicates"] == {**m["duplicates"], "partial": m["partial_copies"]}
    assert numbers["pii"] == m["pii"] and sum(m["pii"].values()) == 3

    tokens = numbers["tokens"]
    totals = manifest(tokens_of(root))["totals"]
    per_doc = tokens["per_document"]
    assert sum(per_doc["counts"]) == per_doc["documents"] == totals["documents"]
    assert per_doc["total"] == tokens["tokens"] == totals["tokens"]
    # the `bytes` tokenizer: one token per UTF-8 byte, plus EOS
    expected = np.array([len(t.encode("utf-8")) + 1 for t in texts])
    assert per_doc["counts"] == np.histogram(expected, bins=np.array(per_doc["edges"]))[0].tolist()


def test_same_build_same_bytes_from_the_tokens_path(built: Path, tmp_path: Path) -> None:
    root = fresh_copy(built, tmp_path)
    folder = shards_of(root)
    report(folder)
    first = {name: (folder / name).read_bytes() for name in REPORT_FILES}
    printed = report(tokens_of(root) / "_MANIFEST.json")  # the tokens manifest finds its shards
    assert printed["report"] == str(folder / "REPORT.md")
    assert {name: (folder / name).read_bytes() for name in REPORT_FILES} == first
    assert not [p.name for p in folder.iterdir() if ".tmp-" in p.name]


def test_a_shards_only_build_reports_without_tokens(built: Path, tmp_path: Path) -> None:
    root = fresh_copy(built, tmp_path)
    folder = shards_of(root)
    report(folder)
    shutil.rmtree(root / "tokens")
    printed = report(folder)
    assert printed["tokens"] is None
    assert not (folder / TOKENS_PLOT).exists()  # the earlier report's plot is gone
    numbers = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    assert numbers["tokens"] is None
    text = (folder / "REPORT.md").read_text(encoding="utf-8")
    assert TOKENS_PLOT not in text and text.count("How to read this:") == 4


@pytest.mark.parametrize("target", ["shard", "tokens", "raw"])
def test_a_tampered_build_is_refused_with_nothing_written(
    built: Path, tmp_path: Path, target: str
) -> None:
    root = fresh_copy(built, tmp_path)
    folder = shards_of(root)
    if target == "shard":
        victim = folder / "shard-00001.parquet"
    elif target == "tokens":
        victim = tokens_of(root) / "shard-00000.bin"
    else:
        (victim,) = (p for p in (root / "raw").glob("*/*.parquet"))
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    before = sorted(p.name for p in folder.iterdir())
    proc = run_corpus("report", folder)
    assert proc.returncode == 65, proc.stderr
    assert "no report written" in proc.stderr or "raw cache" in proc.stderr
    assert proc.stdout == ""
    assert sorted(p.name for p in folder.iterdir()) == before
    assert not any((folder / name).exists() for name in REPORT_FILES)


def test_not_a_build_is_a_usage_error(built: Path, tmp_path: Path) -> None:
    assert run_corpus("report", tmp_path / "missing").returncode == 64
    raw = next((built / "raw").glob("*/_SOURCE.json"))
    assert run_corpus("report", raw).returncode == 64
    assert run_corpus("report", tmp_path).returncode == 64
    assert Counter(p.name for p in tmp_path.iterdir()) == Counter()


def test_write_report_in_python_and_in_another_root_gives_the_same_bytes(
    built: Path, tmp_path: Path
) -> None:
    from corpus_assets.core.stages.report import write_report

    one, two = fresh_copy(built, tmp_path / "one"), fresh_copy(built, tmp_path / "two")
    done = write_report(shards_of(one) / "_MANIFEST.json")
    assert done.files[-1] == done.report == shards_of(one).resolve() / "REPORT.md"
    assert [f.name for f in done.files] == REPORT_FILES
    assert done.numbers == json.loads((shards_of(one) / "report.json").read_text("utf-8"))
    assert done.numbers["tokens"]["manifest"] == str(
        tokens_of(one).relative_to(one) / "_MANIFEST.json"
    )
    report(shards_of(two))
    for name in REPORT_FILES:
        assert (shards_of(one) / name).read_bytes() == (shards_of(two) / name).read_bytes(), name


def test_matplotlib_writes_nothing_into_the_home_folder(built: Path, tmp_path: Path) -> None:
    root = fresh_copy(built, tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MPL", "XDG_"))}
    proc = run_corpus("report", shards_of(root), env={"HOME": str(home)}, environ=env)
    assert proc.returncode == 0, proc.stderr
    assert list(home.iterdir()) == []


def test_a_malformed_manifest_is_refused_with_nothing_written(built: Path, tmp_path: Path) -> None:
    root = fresh_copy(built, tmp_path)
    shutil.rmtree(root / "tokens")  # else the tokens build, built from the old manifest, refuses
    folder = shards_of(root)
    doc = manifest(folder)
    doc["sources"] = [{"name": "tiny"}]  # verify_shards does not read sources; the report does
    (folder / "_MANIFEST.json").write_text(json.dumps(doc), encoding="utf-8")
    before = sorted(p.name for p in folder.iterdir())
    proc = run_corpus("report", folder)
    assert proc.returncode == 65, proc.stderr
    assert "malformed manifest, no report written (KeyError" in proc.stderr
    assert sorted(p.name for p in folder.iterdir()) == before


def test_write_report_wants_the_shards_manifest(built: Path) -> None:
    from corpus_assets.core.errors import ConfigError
    from corpus_assets.core.stages.report import write_report

    with pytest.raises(ConfigError, match="not a shards manifest"):
        write_report(tokens_of(built) / "_MANIFEST.json")
    assert not (shards_of(built) / "REPORT.md").exists()


def test_current_report_is_reused_only_while_it_matches_the_build(
    built: Path, tmp_path: Path
) -> None:
    from corpus_assets.core.stages.report import current_report, write_report

    root = fresh_copy(built, tmp_path)
    shards = shards_of(root) / "_MANIFEST.json"
    assert current_report(shards) is None  # none made yet
    done = write_report(shards)
    assert current_report(shards) == done.report
    # A killed writer's temporary file: not current; the next report removes it.
    leftover = shards_of(root) / ".report_pii.png.tmp-99999"
    leftover.write_bytes(b"half a png")
    assert current_report(shards) is None
    write_report(shards)
    assert not leftover.exists() and current_report(shards) == done.report
    # REPORT.md from before the tokens build (a rewrite killed after report.json): not current.
    text = done.report.read_text(encoding="utf-8")
    done.report.write_text(text.replace("![Tokens per document](report_tokens.png)", ""))
    assert current_report(shards) is None
    # A tokens build made or changed since: not current.
    write_report(shards)
    (tokens_of(root) / "_MANIFEST.json").unlink()
    assert current_report(shards) is None


def test_a_report_completed_after_tokenize_equals_one_made_whole(
    built: Path, tmp_path: Path
) -> None:
    """The tokens step reuses the shards half of the report the shards step wrote."""
    from corpus_assets.core.stages.report import write_report

    whole, halves = fresh_copy(built, tmp_path / "whole"), fresh_copy(built, tmp_path / "halves")
    write_report(shards_of(whole) / "_MANIFEST.json")
    tokens = tokens_of(halves)
    tokens.rename(tokens.with_name("aside"))
    first = write_report(shards_of(halves) / "_MANIFEST.json")
    assert first.numbers["tokens"] is None
    tokens.with_name("aside").rename(tokens)
    (shards_of(halves) / "report_lengths.png").write_bytes(b"drawn by the shards step")
    write_report(shards_of(halves) / "_MANIFEST.json")
    assert (shards_of(halves) / "report_lengths.png").read_bytes() == b"drawn by the shards step"
    for name in REPORT_FILES:
        if name != "report_lengths.png":
            assert (shards_of(whole) / name).read_bytes() == (shards_of(halves) / name).read_bytes()
