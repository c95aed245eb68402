"""The `token_exports` asset: a built partition's tokens as Megatron-LM's and nanotron's files
under `<root>/exports/<format>/<partition>/`, the same bytes `corpus export-tokens` writes; kept
when current, replaced when an older build's, a bad format refused before any export."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dagster as dg

from corpus_assets.assets.token_exports import TokenExportConfig, token_exports
from corpus_assets.core.config import load_config
from corpus_assets.core.stages.export_tokens import export_tokens
from corpus_assets.core.stages.run import run_stage
from corpus_assets.core.store.layout import Layout
from corpus_assets.resources.configs import ConfigStore
from corpus_assets.resources.paths import CorpusPaths


def _materialize(
    root: Path, instance: dg.DagsterInstance, key: str, formats: list[str] | None = None
) -> dg.ExecuteInProcessResult:
    """Materialize the partition; without `formats`, with no run config (the default's)."""
    paths = CorpusPaths(root=str(root))
    ops = {} if formats is None else {"token_exports": TokenExportConfig(formats=formats)}
    return dg.materialize(
        [token_exports],
        partition_key=key,
        instance=instance,
        resources={"paths": paths, "configs": ConfigStore(paths=paths)},
        run_config=dg.RunConfig(ops=ops),
        raise_on_error=False,
    )


def _metadata(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    (event,) = result.get_asset_materialization_events()
    materialization = event.materialization
    return {k: v.value for k, v in materialization.metadata.items()}


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_token_exports_writes_both_formats_once_per_build(
    example: Path, root: Path, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    cfg = load_config(example)
    key, layout = cfg.partition_key, Layout(root.resolve())
    ConfigStore(paths=CorpusPaths(root=str(root))).register(example)
    instance.add_dynamic_partitions("corpus_configs", [key])
    for stage in ("fetch", "shard", "tokenize"):  # the build, without Dagster
        run_stage(stage, example, root, workers=1)
    first = _materialize(root, instance, key)
    assert first.success
    meta = _metadata(first)
    assert (meta["megatron_reused"], meta["nanotron_reused"]) == (False, False)
    assert (meta["documents"], meta["tokens"]) == (300, 119280)
    for fmt, files in (("megatron", 6), ("nanotron", 9)):
        folder = layout.root / "exports" / fmt / key
        assert meta[f"{fmt}_path"] == str(folder) and meta[f"{fmt}_files"] == files
        by_cli = export_tokens(
            layout.tokens(cfg) / "_MANIFEST.json", fmt, str(tmp_path / fmt), print
        )
        assert _tree(folder) == _tree(Path(by_cli.dest))
    again = _metadata(_materialize(root, instance, key))
    assert (again["megatron_reused"], again["nanotron_reused"]) == (True, True)

    stale = layout.root / "exports" / "megatron" / key / "_MANIFEST.json"
    doc = json.loads(stale.read_text())
    doc["source"]["manifest_sha256"] = "0" * 64  # as an export of an older build would say
    stale.write_text(json.dumps(doc))
    replaced = _metadata(_materialize(root, instance, key, ["megatron"]))
    assert replaced["megatron_reused"] is False and "nanotron_path" not in replaced
    assert _tree(stale.parent) == _tree(tmp_path / "megatron")

    bad = _materialize(root, instance, key, ["nanotron", "olmo"])
    assert not bad.success
    failure = bad.get_step_failure_events()[0].step_failure_data.error
    assert failure is not None
    assert "unknown export format 'olmo'; allowed: megatron, nanotron" in failure.message
