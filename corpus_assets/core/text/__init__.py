"""Text: normalization, quality filters, PII scrubbing, MinHash, partial copies, tokenizers."""
