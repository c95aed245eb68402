"""Registered classifier configs: `<root>/classifier-configs/<hash12>.json` (config_registry.py).

A classifier config is a mapping with `positive` and `negative`. The partition key is
`<name>-<hash12>`; the trained model goes to `Layout.classifier(key)`.
"""

from __future__ import annotations

from corpus_assets.core.classifier_config import (
    CLASSIFIER_KEY,
    LoadedClassifierConfig,
    load_classifier_config,
)
from corpus_assets.core.store.config_registry import ConfigRegistry, Registered

CLASSIFIER_CONFIGS = "classifier-configs"
CLASSIFIERS = ConfigRegistry(
    "classifier",
    CLASSIFIER_CONFIGS,
    CLASSIFIER_KEY,
    load_classifier_config,
    ("positive", "negative"),
)
RegisteredClassifier = Registered[LoadedClassifierConfig]

is_classifier_config = CLASSIFIERS.recognises
register = CLASSIFIERS.register
path_for = CLASSIFIERS.path_for
load = CLASSIFIERS.load
