"""compute-sanitizer on one variant of a chapter's race: the findings, with the cell line of each.

An out-of-bounds write usually does not crash: it corrupts a neighbour and the check passes or fails
for the wrong reason. memcheck finds it, racecheck finds shared-memory races (a missing
``__syncthreads``), initcheck finds reads of memory nobody wrote, synccheck finds barriers that not
every thread reaches. Like Nsight Compute, the sanitizer must launch the process, so the variant runs
in a child (:mod:`labmagic.child.worker` ``--mode sanitize``).

With ``-lineinfo`` (on by default for ``%%cuda_kernel``) every report carries the source location,
``at vecadd+0x90 in cell:5``: the cell's own line number, because NVRTC compiles each cell under the
name ``cell`` with a ``#line`` directive. The child also reports the source of every CUDA cell it
compiled, so the finding can quote the line itself.
"""

from __future__ import annotations

import dataclasses
import subprocess

from ..errors import LabError
from ..paths import repo_root
from ..runtime import require_gpu
from ..tools import find_nsight_tool
from .protocol import child_command, child_env, child_record, log_tail
from .sanitizer_report import TOOLS, Finding, attach_sources, parse_output

#: memcheck knows allocations by cudaMalloc: a caching allocator hands out slices of larger blocks, so
#: a write one element past a tensor lands inside the block and goes unseen. Under the sanitizer each
#: tensor gets its own cudaMalloc (torch, and JAX's "platform" allocator).
UNPOOLED = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}
#: Bytes of padding memcheck puts after every allocation (``--padding``; its default is none). Un-pooled
#: allocations can still abut: a write 16 KB past one tensor then lands inside the next one, an address memcheck
#: knows, and goes unseen. With a MiB of padding behind each, any write up to a MiB past its tensor is out of bounds.
PADDING_BYTES = 1 << 20


class SanitizerError(LabError, RuntimeError):
    """compute-sanitizer could not run the variant at all."""


def find_sanitizer() -> str:
    return find_nsight_tool("compute-sanitizer", "LABMAGIC_COMPUTE_SANITIZER")


def kernel_sources(namespace: dict) -> dict[str, tuple[str, int]]:
    """Symbol and name -> (cell source, first line) of every compiled CUDA kernel in a namespace."""
    out: dict[str, tuple[str, int]] = {}
    for value in list(namespace.values()):
        module = getattr(value, "module", None)
        result = getattr(module, "result", None)
        source = getattr(result, "source", None)
        if not isinstance(source, str):
            continue
        entry = (source, getattr(result, "first_line", 1))
        for attr in ("symbol", "name"):
            name = getattr(value, attr, None)
            if isinstance(name, str):
                out[name] = entry
    return out


@dataclasses.dataclass
class SanitizeResult:
    chapter: str
    variant: str
    shape: str
    tool: str
    findings: list[Finding]
    errors: int | None  # the sanitizer's own count
    exit_code: int = 0
    child_error: str | None = None
    log: str = ""

    @property
    def clean(self) -> bool:
        return not self.findings and not self.errors and self.child_error is None and self.errors is not None

    def _repr_html_(self) -> str:
        from ..display.sanitizer_view import sanitize_html

        return sanitize_html(self)

    def __repr__(self) -> str:
        from ..display.sanitizer_view import sanitize_text

        return sanitize_text(self)


def sanitizer_command(sanitizer: str, tool: str, child: list[str], extra: tuple[str, ...] = ()) -> list[str]:
    # racecheck's default "analysis" report names each race once with both accesses' lines.
    cmd = [sanitizer, "--tool", tool, "--print-limit", "100", "--target-processes", "all"]
    if tool == "memcheck":
        cmd += ["--padding", str(PADDING_BYTES)]
    return [*cmd, *extra, *child]


def sanitize_variant(chapter: str, variant: str, shape: str | None = None, *, tool: str = "memcheck",
                     params: dict | None = None, extra: tuple[str, ...] = (), timeout: float | None = 1800,
                     race: str | None = None) -> SanitizeResult:
    """Run ``variant`` once at ``shape`` (default: the race's largest check shape, odd-sized) under
    compute-sanitizer's ``tool``; return its findings with their cell lines."""
    if tool not in TOOLS:
        raise LabError(f"--tool must be one of {', '.join(TOOLS)}, not {tool!r}")
    require_gpu("%sanitize")
    sanitizer = find_sanitizer()
    child = child_command(chapter, variant, shape, "sanitize", 1, params, race)
    if shape is None:
        child += ["--check-shape"]  # the race's largest check shape: odd sizes catch guard bugs
    cmd = sanitizer_command(sanitizer, tool, child, extra)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=repo_root(),
                          env=child_env(**UNPOOLED))
    log = proc.stdout + "\n" + proc.stderr
    record = child_record(proc.stdout)
    if not record and "LABMAGIC" not in log and proc.returncode != 0 and "=========" not in log:
        raise SanitizerError(f"compute-sanitizer failed (exit code {proc.returncode})", detail=log_tail(log))
    findings, errors = parse_output(log, tool)
    attach_sources(findings, {k: tuple(v) for k, v in (record.get("sources") or {}).items()})
    # The child names the shape it ran, also when the variant faulted; one that died before choosing leaves it to
    # what was asked for.
    ran_at = record.get("shape") or shape or "the race's largest check shape"
    return SanitizeResult(chapter=record.get("chapter", str(chapter)), variant=variant,
                          shape=ran_at, tool=tool, findings=findings, errors=errors,
                          exit_code=proc.returncode,
                          child_error=None if record.get("ok", False) else (record.get("error") or "the child died"),
                          log=log)
