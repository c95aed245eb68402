"""corpus_assets: reproducible language-model training corpora as a Dagster asset graph."""
