"""What one NVRTC compile produced: the CUBIN, the PTX, the log and the resource report, per kernel."""

from __future__ import annotations

import dataclasses

from .includes import Header
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
    #: Every header the compile read that is not the toolkit's (:mod:`.includes`), each with the hash of its text.
    headers: tuple[Header, ...] = ()

    @property
    def provenance_text(self) -> str:
        """The source and the hash of each header it read: what a benchmark's source hash covers, so that an edited
        header makes the rows measured with the old one stale (just the source where it read none)."""
        return self.source + "".join(f"\n// {h.name} sha256:{h.sha256}" for h in self.headers)
