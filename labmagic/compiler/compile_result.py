"""What one NVRTC compile produced: the CUBIN, the PTX, the log and the resource report, per kernel."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..paths import atomic_write, cache_dir
from .resources import Resources


@dataclasses.dataclass(frozen=True)
class CompileResult:
    """Everything one compile produced. ``lowered`` maps each kernel's expression to its symbol."""

    source: str
    arch: str
    options: tuple[str, ...]
    cubin: bytes
    ptx: str | None
    log: str
    lowered: dict[str, str]
    resources: dict[str, Resources]
    key: str
    first_line: int = 1
    #: Where this result came from: ``compiled``, ``memory`` or ``disk``; and how long it took.
    origin: str = "compiled"
    seconds: float = 0.0
    #: Parameter types as written (``real``) that NVRTC resolved, to their canonical type (``float``).
    types: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def cubin_path(self) -> Path:
        """The CUBIN on disk (written by the cache), for tools that want a file (CuPy, nvdisasm)."""
        path = cache_dir() / f"{self.key}.cubin"
        if not path.exists():
            atomic_write(path, self.cubin)
        return path
