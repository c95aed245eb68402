"""pyarrow in a stage process: no pandas import, and Arrow's freed pages handed back."""

from __future__ import annotations

import sys
from importlib.machinery import ModuleSpec
from types import ModuleType

import pyarrow as pa


class _NoPandas:
    """A meta-path finder that refuses `pandas` (and nothing else)."""

    def find_spec(
        self, name: str, path: object = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name == "pandas":
            raise ImportError("pandas is not used by this stage")
        return None


def skip_pandas() -> None:
    """Let pyarrow take pandas as absent when it converts Python lists.

    pyarrow imports pandas on its first `pa.array` of a list only to ask whether the list is a
    Series: about 0.25 s of CPU, again in each forked worker. Its shim tries once and remembers
    the answer, so pandas is refused for that one try; code that asks for pandas itself (an
    `import pandas`, `Table.from_pandas`) still gets it. Nothing written depends on it.
    """
    if "pandas" in sys.modules:
        return
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([0])
    finally:
        sys.meta_path.remove(finder)


def release_freed_pages() -> None:
    """Hand the pages that Arrow's pools keep after a free back to the system.

    mimalloc (pyarrow's default pool) keeps freed pages: after a row group holding one 200 MB
    document was read, about 240 MB that nothing used (the reader's page buffers), on top of
    the table. Released after each read, the shard stage's peak on the 100 MB benchmark corpus
    is about that of the system allocator (157 against 145 MB, its workers' 279 against 303),
    and on one 200 MB document 530 against 724 MB: the system allocator kept those buffers.
    """
    for make in (pa.default_memory_pool, pa.mimalloc_memory_pool, pa.jemalloc_memory_pool):
        try:
            make().release_unused()
        except NotImplementedError:  # a pool this pyarrow was built without
            continue
