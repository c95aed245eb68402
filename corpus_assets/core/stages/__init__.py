"""Stages: fetch, shard, tokenize, cleanup, verify and audit, and running one by name."""
