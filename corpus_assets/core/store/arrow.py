"""pyarrow set up for a stage process: the system allocator, and no pandas import."""

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


def use_system_allocator() -> None:
    """Allocate Arrow buffers with malloc instead of pyarrow's default mimalloc pool.

    mimalloc keeps freed pages: reading task files one after another held about 70 MB more at
    the shard stage's peak (223 against 161 MB on the 100 MB benchmark corpus, same CPU time).
    """
    pa.set_memory_pool(pa.system_memory_pool())
