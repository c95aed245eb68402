"""The `mixture` asset: a mixture config's sample index over its components' token builds.

`corpus mix` builds it and publishes `mixtures/<key>/` (`train.npy`, `validation.npy`,
`runs.npy`, then `_MANIFEST.json`); the materialization's metadata comes from that manifest.
`MixtureDataset` reads it for every data-parallel rank.
"""

import json
from typing import Any

import dagster as dg

from corpus_assets.assets.step_failure import one_sentence
from corpus_assets.assets.tokens import tokens
from corpus_assets.core.errors import EXIT_DATA
from corpus_assets.core.store.atomic import MANIFEST
from corpus_assets.core.version import CODE_VERSION
from corpus_assets.resources.mixture_configs import MixtureConfigStore
from corpus_assets.resources.partitions import mixture_configs
from corpus_assets.resources.paths import CorpusPaths
from corpus_assets.resources.stage_runner import StageRunner

NO_PARTITIONS = dg.SpecificPartitionsPartitionMapping([])


@dg.asset(
    code_version=CODE_VERSION,
    partitions_def=mixture_configs,
    group_name="training",
    # Lineage: which tokens partitions a mixture reads is named in its config (listed in the
    # metadata, `components`); no tokens partition is mapped to it, since the default identity
    # between the two dynamic partition sets would make an asset backfill of mixtures fail.
    deps=[dg.AssetDep(tokens, partition_mapping=NO_PARTITIONS)],
    kinds={"python", "numpy"},
    tags={"corpus/stage": "mixture"},
)
def mixture(
    context: dg.AssetExecutionContext,
    paths: CorpusPaths,
    mixture_configs: MixtureConfigStore,
    stage_runner: StageRunner,
) -> dg.MaterializeResult[Any]:
    """Training samples of seq_len + 1 tokens mixed from token builds by weight or token
    budget, shuffled, with held-out validation documents (`corpus mix`); read per rank by
    `MixtureDataset`."""
    key = context.partition_key
    with one_sentence(context):
        config_file = mixture_configs.file_for(key)
        stage_runner.run_mix(context, config_file, paths.root_path())
        folder = mixture_configs.folder_for(key)
        manifest = _read_manifest(folder / MANIFEST)
    return dg.MaterializeResult(
        metadata=mixture_metadata(manifest, str(folder)),
        data_version=dg.DataVersion(_files_digest(manifest)),
    )


def mixture_metadata(manifest: dict[str, Any], folder: str) -> dict[str, Any]:
    """The manifest as metadata: sample counts as numbers, a table of the components."""
    train, validation = manifest["train"], manifest["validation"]
    rows = [
        dg.TableRecord(
            {
                "component": c["name"],
                "tokens": c["tokens"],
                "token_manifest_sha256": c["manifest_sha256"][:12],
                "samples": c["samples"],
                "share": c["share"],
                "asked": json.dumps(c["asked"]),
                "epochs": c["epochs"],
                "validation_documents": c["validation_documents"],
            }
        )
        for c in manifest["components"]
    ]
    schema = dg.TableSchema(
        columns=[
            dg.TableColumn("component", "string"),
            dg.TableColumn("tokens", "string", description="partition key, folder or URL"),
            dg.TableColumn("token_manifest_sha256", "string"),
            dg.TableColumn("samples", "int"),
            dg.TableColumn("share", "float", description="of the training tokens"),
            dg.TableColumn("asked", "string"),
            dg.TableColumn("epochs", "float"),
            dg.TableColumn("validation_documents", "int"),
        ]
    )
    return {
        "path": dg.MetadataValue.path(folder),
        "seq_len": dg.MetadataValue.int(manifest["seq_len"]),
        "train_samples": dg.MetadataValue.int(train["samples"]),
        "train_tokens": dg.MetadataValue.int(train["tokens"]),
        "validation_samples": dg.MetadataValue.int(validation["samples"]),
        "validation_documents": dg.MetadataValue.int(validation["documents"]),
        "components": dg.MetadataValue.table(rows, schema),
    }


def _files_digest(manifest: dict[str, Any]) -> str:
    return ",".join(f["sha256"][:12] for f in manifest["files"])


def _read_manifest(path: Any) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise dg.Failure(
            f"`corpus mix` succeeded but {path} is unreadable: {exc}",
            metadata={"exit_code": EXIT_DATA},
            allow_retries=False,
        ) from None
