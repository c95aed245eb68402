"""Asset checks on the manifests: thin wrappers over `core.audit`, one result per partition.

The manifest-validity checks are blocking: a shards build that does not verify stops tokens.
The checks of one asset run as one step (`multi_asset_check`): every step costs a few event
writes, and these audits share their inputs. Checks are partitioned by `corpus_configs` so the UI
shows results per config (Dagster marks partitioned checks as preview; that warning is silenced
here and only here).
"""

import warnings
from collections.abc import Callable, Iterator, Mapping
from functools import partial

import dagster as dg

from corpus_assets.assets.shards import shards
from corpus_assets.assets.tokens import tokens
from corpus_assets.core.config import LoadedConfig
from corpus_assets.core.stages import audit
from corpus_assets.core.store.layout import Layout
from corpus_assets.resources.configs import ConfigStore
from corpus_assets.resources.partitions import corpus_configs
from corpus_assets.resources.paths import CorpusPaths

SHARDS_MANIFEST_VALID = "shards_manifest_valid"
SHARDS_NO_EXACT_DUPLICATES = "shards_no_exact_duplicates"
SHARDS_NO_PII_RESIDUE = "shards_no_pii_residue"
SHARDS_LICENSES_ALLOWED = "shards_licenses_allowed"
SHARDS_DECONTAMINATED = "shards_decontaminated"
TOKENS_MANIFEST_VALID = "tokens_manifest_valid"
TOKENS_MATCH_SHARDS = "tokens_match_shards"
TOKENS_ROUNDTRIP_SAMPLE = "tokens_roundtrip_sample"

Auditor = Callable[[LoadedConfig, Layout], audit.Audit]


def _shards_manifest(cfg: LoadedConfig, layout: Layout) -> audit.Audit:
    """The shards manifest verifies: every shard there, digests and counts add up."""
    return audit.manifest_valid(cfg, layout, "shards")


def _tokens_manifest(cfg: LoadedConfig, layout: Layout) -> audit.Audit:
    """The tokens manifest verifies: every .bin/.idx there, digests, EOS and totals right."""
    return audit.manifest_valid(cfg, layout, "tokens")


SHARDS_AUDITS: dict[str, Auditor] = {
    SHARDS_MANIFEST_VALID: _shards_manifest,
    SHARDS_NO_EXACT_DUPLICATES: audit.exact_duplicates,
    SHARDS_NO_PII_RESIDUE: audit.pii_residue,
    SHARDS_LICENSES_ALLOWED: audit.licenses_allowed,
    SHARDS_DECONTAMINATED: audit.decontaminated,
}
TOKENS_AUDITS: dict[str, Auditor] = {
    TOKENS_MANIFEST_VALID: _tokens_manifest,
    TOKENS_MATCH_SHARDS: audit.tokens_match_shards,
    TOKENS_ROUNDTRIP_SAMPLE: audit.roundtrip_sample,
}
BLOCKING = frozenset({SHARDS_MANIFEST_VALID, TOKENS_MANIFEST_VALID})
# The checks are partitioned, so the UI cannot execute one alone: this says where to go instead.
RERUN = "Run again without rebuilding: Jobs → corpus_recheck → Launchpad, pick the partition."


def _specs(asset: dg.AssetsDefinition, audits: dict[str, Auditor]) -> list[dg.AssetCheckSpec]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return [
            dg.AssetCheckSpec(
                name,
                asset=asset,
                blocking=name in BLOCKING,
                partitions_def=corpus_configs,
                description=f"{(auditor.__doc__ or '').strip()} {RERUN}",
            )
            for name, auditor in audits.items()
        ]


def _evaluate(
    context: dg.AssetCheckExecutionContext,
    asset: dg.AssetsDefinition,
    audits: dict[str, Auditor],
    paths: CorpusPaths,
    configs: ConfigStore,
) -> Iterator[dg.AssetCheckResult]:
    cfg, layout = configs.load(context.partition_key), paths.layout()
    yield from check_results(asset.key, {n: partial(a, cfg, layout) for n, a in audits.items()})


def check_results(
    key: dg.AssetKey, audits: Mapping[str, Callable[[], audit.Audit]]
) -> Iterator[dg.AssetCheckResult]:
    """One check result per audit, its counts and problems as metadata."""
    for name, run in audits.items():
        try:
            found = run()
        except Exception as exc:  # an unreadable build fails the check, it does not crash it
            found = audit.Audit(passed=False, problems=(f"{type(exc).__name__}: {exc}",))
        metadata: dict[str, dg.RawMetadataValue] = dict(found.counts)
        if found.problems:
            metadata["problems"] = dg.MetadataValue.md("\n".join(f"- {p}" for p in found.problems))
        yield dg.AssetCheckResult(
            asset_key=key, check_name=name, passed=found.passed, metadata=metadata
        )


@dg.multi_asset_check(specs=_specs(shards, SHARDS_AUDITS), name="shards_checks")
def shards_checks(
    context: dg.AssetCheckExecutionContext, paths: CorpusPaths, configs: ConfigStore
) -> Iterator[dg.AssetCheckResult]:
    """Audits of the partition's shards: manifest (blocking), duplicates, PII, licenses, evals."""
    yield from _evaluate(context, shards, SHARDS_AUDITS, paths, configs)


@dg.multi_asset_check(specs=_specs(tokens, TOKENS_AUDITS), name="tokens_checks")
def tokens_checks(
    context: dg.AssetCheckExecutionContext, paths: CorpusPaths, configs: ConfigStore
) -> Iterator[dg.AssetCheckResult]:
    """Audits of the partition's token files: manifest (blocking), shard counts, a decode sample."""
    yield from _evaluate(context, tokens, TOKENS_AUDITS, paths, configs)


ALL_CHECKS = [shards_checks, tokens_checks]
CHECK_NAMES = (*SHARDS_AUDITS, *TOKENS_AUDITS)
