"""Where a stage's tasks run: this machine's process pool (the default) or a Ray cluster.

An execution setting, like the worker count: never part of the config identity and never
written into an output, so a build is byte-identical whichever backend ran its tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

from corpus_assets.core.errors import ConfigError

BACKENDS = ("local", "ray")


@dataclass(frozen=True)
class Backend:
    """`local` (a process pool here) or `ray` (at `ray_address`, else a local Ray started and
    stopped by the stage). `shared_root`: every Ray node sees the data root at the same path
    (checked; tasks read and write it), else tasks get their inputs and send their files back
    through Ray's object store, and the stage process writes them (`ray_shipping`)."""

    name: str = "local"
    ray_address: str | None = None
    shared_root: bool = True

    def __post_init__(self) -> None:
        if self.name not in BACKENDS:
            raise ConfigError(f"unknown backend {self.name!r}; allowed: {', '.join(BACKENDS)}")
        if self.ray_address is not None and self.name != "ray":
            raise ConfigError("--ray-address needs --backend ray")
        if self.ray_address is not None and not self.ray_address.strip():
            raise ConfigError("--ray-address is empty; give HOST:PORT, or leave it out")
        if not self.shared_root and self.name != "ray":
            raise ConfigError("--ray-shared-root no needs --backend ray")

    @property
    def is_ray(self) -> bool:
        return self.name == "ray"


LOCAL = Backend()
