"""Storage: atomic files, the data-root layout, locks, ledger, registry, sources, progress."""
