"""`corpus report`: a verified build's REPORT.md, its PNG plots and report.json, beside its shards.

Files, in the shards folder `<root>/corpus/<dataset>/<version>/<hash12>/`: `report_lengths.png`,
`report_drops.png`, `report_duplicates.png`, `report_pii.png`, `report_quality_<name>.png` (one
per quality classifier of the build), `report_tokens.png` (when the tokens build exists),
`report.json` (every number the plots and tables show) and `REPORT.md`, each written by the
atomic writer (temp name, fsync, rename, folder fsync), REPORT.md last.

The report is **outside** the manifest's digests: `_MANIFEST.json` is the build's completion
marker, written last by the shard stage and the file `corpus verify` and the tokens manifest
(its `shards_manifest_sha256`) check. A report made later must not change it, or reporting a
verified build would invalidate it and its tokens. `corpus verify` checks only the files a
manifest names, so the report files beside them change nothing; `report.json` records the
sha256 of the manifests it was made from, so a report can be matched to its build. The report
is deterministic (no timestamps): the same build gives the same bytes.

Nothing is written unless the build verifies: the shards (and the tokens build, when present)
are verified, the raw cache is checked against the manifest's source digests, and every number
and plot is computed in memory first.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus_assets.core.errors import ConfigError, DataError
from corpus_assets.core.secrets import mask_data
from corpus_assets.core.stages.report_data import (
    classifier_numbers,
    common_bins,
    lengths_after,
    lengths_before,
    tokens_per_document,
)
from corpus_assets.core.stages.report_markdown import render
from corpus_assets.core.stages.report_plots import (
    QUALITY_PLOT,
    all_plots,
    quality_plot_name,
    tokens_plots,
)
from corpus_assets.core.stages.shard_verify import verify_shards
from corpus_assets.core.stages.tokenize_verify import verify_tokens
from corpus_assets.core.store.atomic import MANIFEST, dump_json, write_bytes
from corpus_assets.core.store.layout import tokenizer_slug
from corpus_assets.core.store.records import load_object

REPORT = "REPORT.md"
REPORT_JSON = "report.json"
TOKENS_PLOT = "report_tokens.png"
PLOTS = ("report_lengths.png", "report_drops.png", "report_duplicates.png", "report_pii.png")


@dataclass(frozen=True)
class ReportResult:
    """What `write_report` wrote: the files (REPORT.md last) and the numbers behind them."""

    report: Path
    files: list[Path]
    numbers: dict[str, Any]


@dataclass(frozen=True)
class Build:
    """A shards manifest, the data root it lies in, and its tokens manifest when one exists."""

    shards_manifest: Path
    root: Path
    tokens_manifest: Path | None


def find_build(path: Path) -> Build:
    """The build at `path`: a shards or tokens `_MANIFEST.json`, or the folder holding one."""
    manifest = path / MANIFEST if path.is_dir() else path
    if manifest.name != MANIFEST or not manifest.is_file():
        raise ConfigError(f"{path}: not a build (a shards or tokens {MANIFEST}, or its folder)")
    kind = load_object(manifest, "manifest").get("kind")
    if kind == "tokens":
        rel = load_object(manifest, "tokens manifest").get("shards_manifest")
        if not isinstance(rel, str):
            raise DataError(f"{manifest}: corrupt tokens manifest: no shards_manifest path")
        shards = (manifest.parent / rel).resolve()
        return Build(shards, _root_of(shards), manifest.resolve())
    if kind != "shards":
        raise ConfigError(
            f"{manifest}: a {kind!r} manifest; `corpus report` needs shards or tokens"
        )
    shards = manifest.resolve()
    root = _root_of(shards)
    return Build(shards, root, _tokens_of(shards, root))


def _root_of(shards_manifest: Path) -> Path:
    """The data root of `<root>/corpus/<dataset>/<version>/<hash12>/_MANIFEST.json`."""
    folder = shards_manifest.parent
    doc = load_object(shards_manifest, "shards manifest")
    config = doc.get("config")
    cfg: dict[str, Any] = config if isinstance(config, dict) else {}
    expected = [
        "corpus",
        cfg.get("dataset"),
        cfg.get("version"),
        str(doc.get("config_sha256"))[:12],
    ]
    names = [p.name for p in reversed(folder.parents[:3])] + [folder.name]
    if len(folder.parents) < 4 or names != expected:
        raise DataError(
            f"{shards_manifest}: not at <root>/corpus/<dataset>/<version>/<hash12>/ of its config; "
            "the report reads the raw cache of that data root"
        )
    return folder.parents[3]


def _tokens_of(shards_manifest: Path, root: Path) -> Path | None:
    """The tokens manifest of the same build, if the tokenize stage published one."""
    doc = load_object(shards_manifest, "shards manifest")
    cfg, folder = doc["config"], shards_manifest.parent
    tokenizer = cfg.get("tokenizer", {}).get("id", "")
    tokens = root / "tokens" / tokenizer_slug(tokenizer) / cfg["dataset"] / cfg["version"]
    manifest = tokens / folder.name / MANIFEST
    return manifest if manifest.is_file() else None


def _refuse(problems: list[str], what: Path) -> None:
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise DataError(
            f"{what} does not verify, no report written: {'; '.join(problems[:3])}{more}"
        )


def collect(build: Build) -> dict[str, Any]:
    """Every number of the report, from a verified build (DataError when it does not verify)."""
    raw = build.shards_manifest.read_bytes()
    doc = load_object(build.shards_manifest, "shards manifest")
    _refuse(verify_shards(build.shards_manifest, doc), build.shards_manifest)
    tokens = _verified_tokens(build)
    before = lengths_before(build.root, doc)
    after = lengths_after(build.shards_manifest.parent, doc)
    bins = common_bins(before, after)
    return {
        "build_id": doc["build_id"],
        "dataset": doc["config"]["dataset"],
        "version": doc["config"]["version"],
        "config_sha256": doc["config_sha256"],
        "config": mask_data(doc["config"]),  # URL secrets masked, whoever wrote the manifest
        "shards_manifest_sha256": hashlib.sha256(raw).hexdigest(),
        "counts": {
            "documents_in": doc["documents_in"],
            "documents_out": doc["documents_out"],
            "text_bytes_in": doc.get("text_bytes_in"),
            "text_bytes_out": doc["text_bytes_out"],
            "shards": len(doc["shards"]),
            "shard_bytes": sum(s["bytes"] for s in doc["shards"]),
        },
        "lengths": {
            "unit": "characters",
            "edges": before.to_json(bins)["edges"],
            "before": before.to_json(bins),
            "after": after.to_json(bins),
        },
        "dropped": doc["dropped"],
        **({"lines_removed": doc["lines_removed"]} if "lines_removed" in doc else {}),
        "duplicates": {
            "exact": doc["duplicates"].get("exact", 0),
            "near": doc["duplicates"].get("near", 0),
            "partial": doc.get("partial_copies", 0),
        },
        "pii": doc["pii"],
        **({"languages": doc["language"]["documents"]} if "language" in doc else {}),
        **({"classifiers": classifier_numbers(doc)} if "classifiers" in doc else {}),
        "tokens": tokens,
    }


def _verified_tokens(build: Build) -> dict[str, Any] | None:
    """The tokens numbers of a verified tokens build; None without one."""
    if build.tokens_manifest is None:
        return None
    tdoc = load_object(build.tokens_manifest, "tokens manifest")
    _refuse(verify_tokens(build.tokens_manifest, tdoc), build.tokens_manifest)
    return _tokens_numbers(build, tdoc)


def _shards_part(build: Build) -> tuple[dict[str, Any], dict[str, bytes]] | None:
    """The numbers and shard plots of a report made from this shards manifest as it is now.

    After the tokenize stage only the tokens half is new: the shards half (the raw and shard
    lengths, four plots) is taken from the report the shards step wrote; the shards are still
    verified.
    Its PNGs were written before its report.json, each by rename, so they are whole."""
    folder = build.shards_manifest.parent
    if _leftovers(folder):
        return None
    try:
        made = json.loads((folder / REPORT_JSON).read_text(encoding="utf-8"))
        if not isinstance(made, dict):
            return None
        plots = {name: (folder / name).read_bytes() for name in shard_plots(made)}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not _made_from(made, build.shards_manifest):
        return None
    doc = load_object(build.shards_manifest, "shards manifest")
    _refuse(verify_shards(build.shards_manifest, doc), build.shards_manifest)  # still verified
    return made, plots


def _tokens_numbers(build: Build, tdoc: dict[str, Any]) -> dict[str, Any]:
    assert build.tokens_manifest is not None
    raw = build.tokens_manifest.read_bytes()
    rel = Path(build.tokens_manifest).relative_to(build.root)
    return {
        "manifest": str(rel),
        "manifest_sha256": hashlib.sha256(raw).hexdigest(),
        "tokenizer": tdoc["tokenizer"]["id"],
        "vocab_size": tdoc["vocab_size"],
        "dtype": tdoc["dtype"],
        "documents": tdoc["totals"]["documents"],
        "tokens": tdoc["totals"]["tokens"],
        "file_bytes": sum(f["bytes"] for f in tdoc["files"]),
        "per_document": tokens_per_document(build.tokens_manifest.parent, tdoc).to_json(),
    }


def write_report(shards_manifest: Path, tokens_manifest: Path | None = None) -> ReportResult:
    """Verify the build of `shards_manifest`, then write its plots, report.json and REPORT.md.

    `tokens_manifest` defaults to the tokens build of the same config in the same data root,
    if there is one. Raises DataError (nothing written) when the build does not verify.
    """
    found = find_build(shards_manifest)
    if Path(shards_manifest).resolve() not in (found.shards_manifest, found.shards_manifest.parent):
        raise ConfigError(f"{shards_manifest}: not a shards manifest (nor its folder)")
    if tokens_manifest is not None:
        found = Build(found.shards_manifest, found.root, Path(tokens_manifest).resolve())
    return write_build_report(found)


def write_build_report(build: Build) -> ReportResult:
    """`write_report` of a build found by `find_build`."""
    try:
        reused = _shards_part(build)
        if reused is None:
            numbers = collect(build)
            plots = all_plots(numbers)
        else:
            numbers = {**reused[0], "tokens": _verified_tokens(build)}
            plots = reused[1] | tokens_plots(numbers)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DataError(
            f"{build.shards_manifest}: malformed manifest, no report written "
            f"({type(exc).__name__}: {exc})"
        ) from None
    text = render(numbers, list(plots)).encode("utf-8")
    folder = build.shards_manifest.parent
    for stale in _leftovers(folder):  # of a report writer that was killed
        stale.unlink(missing_ok=True)
    written = []
    for name, png in plots.items():
        write_bytes(folder / name, png)
        written.append(folder / name)
    if TOKENS_PLOT not in plots:
        (folder / TOKENS_PLOT).unlink(missing_ok=True)  # from a report made when tokens existed
    write_bytes(folder / REPORT_JSON, dump_json(numbers))
    write_bytes(folder / REPORT, text)
    written += [folder / REPORT_JSON, folder / REPORT]
    return ReportResult(
        report=folder / REPORT, files=written, numbers=json.loads(dump_json(numbers))
    )


def current_report(shards_manifest: Path) -> Path | None:
    """The build's REPORT.md if it was made from its manifests as they are now, else None.

    A no-op rebuild then shows the same report without drawing it again."""
    build = find_build(shards_manifest)
    folder = build.shards_manifest.parent
    try:
        made = json.loads((folder / REPORT_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (folder / REPORT).is_file() or not isinstance(made, dict) or _leftovers(folder):
        return None
    if not _made_from(made, build.shards_manifest):
        return None
    tokens = made.get("tokens")
    if build.tokens_manifest is None:
        if tokens is not None:
            return None
    elif not isinstance(tokens, dict) or tokens.get("manifest_sha256") != _sha256(
        build.tokens_manifest
    ):
        return None
    try:  # REPORT.md is written last: one from before a killed rewrite would not match
        names = [*shard_plots(made), *([TOKENS_PLOT] if tokens is not None else [])]
        same = render(made, names) == (folder / REPORT).read_text(encoding="utf-8")
    except (KeyError, TypeError, ValueError, AttributeError, OSError):
        return None
    return folder / REPORT if same else None


def shard_plots(numbers: dict[str, Any]) -> list[str]:
    """The plots a report of these numbers draws from the shards: PLOTS, then one per classifier."""
    return [*PLOTS, *(quality_plot_name(c["name"]) for c in numbers.get("classifiers", []))]


def _made_from(made: dict[str, Any], shards_manifest: Path) -> bool:
    """Whether the numbers `made` are of this shards manifest as it is now, with every part the
    report shows of it (a report of the same manifest made before the report showed classifiers
    or removed lines is not)."""
    if made.get("shards_manifest_sha256") != _sha256(shards_manifest):
        return False
    doc = load_object(shards_manifest, "shards manifest")
    return all((key in doc) == (key in made) for key in ("classifiers", "lines_removed"))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _leftovers(folder: Path) -> list[Path]:
    """Temporary files of report files (`.NAME.tmp-PID`) that a killed writer left behind."""
    names = {*PLOTS, TOKENS_PLOT, REPORT_JSON, REPORT}

    def ours(name: str) -> bool:
        return name in names or (name.startswith(QUALITY_PLOT) and name.endswith(".png"))

    return [p for p in folder.glob(".*.tmp-*") if ours(p.name[1:].rsplit(".tmp-", 1)[0])]
