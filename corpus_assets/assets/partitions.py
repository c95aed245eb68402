"""One partition per registered corpus config, keyed `<dataset>-<version>-<hash12>`."""

from __future__ import annotations

import dagster as dg

CORPUS_CONFIGS = "corpus_configs"

corpus_configs = dg.DynamicPartitionsDefinition(name=CORPUS_CONFIGS)
