"""A kernel that faults: say so plainly, once, instead of a cascade of unrelated-looking errors.

An illegal memory access inside a kernel is reported asynchronously, by whatever CUDA call comes next
(often a torch op in a later cell), and it poisons the CUDA context for the rest of the process. So
we remember the last launches labmagic made, recognise the sticky CUDA errors wherever they surface,
and tell the reader: which kernel probably faulted, in which launch, that the notebook kernel must be
restarted, and that ``%sanitize`` finds the line.
"""

from __future__ import annotations

import collections
import itertools
import re
import sys
import typing

from ..errors import LabError

#: Errors after which the CUDA context cannot be used again (cudaError / CUresult names and texts).
_STICKY = re.compile(
    r"illegal memory access|ILLEGAL_ADDRESS|misaligned address|MISALIGNED_ADDRESS|unspecified launch failure|"
    r"LAUNCH_FAILED|illegal instruction|ILLEGAL_INSTRUCTION|device-side assert|ASSERT|hardware stack error|"
    r"HARDWARE_STACK_ERROR|invalid program counter|INVALID_PC",
)


class Launch(typing.NamedTuple):
    number: int
    kernel: str
    grid: tuple
    block: tuple
    smem: int
    cell: int | None


_counter = itertools.count(1)
#: The last launches as plain tuples (the fields of Launch): a launch pays for one tuple, not an object.
_recent: collections.deque[tuple] = collections.deque(maxlen=8)
_fault: str | None = None
#: The display hook of the running IPython shell, once one is found. While a cell runs, its ``exec_result`` is that
#: cell's ExecutionResult, which holds the cell's number (``In [n]``).
_displayhook = None


class KernelFaultError(LabError, RuntimeError):
    """The CUDA context is broken by a faulting kernel; only a restart recovers it."""


def _find_displayhook():
    """The running IPython shell's display hook, or None. Looked up only until one is found: ``get_ipython()``
    costs about 2 us, a launch should not, and a process keeps its one shell."""
    global _displayhook
    interactiveshell = sys.modules.get("IPython.core.interactiveshell")  # no IPython imported: no shell
    if interactiveshell is not None and interactiveshell.InteractiveShell.initialized():
        _displayhook = interactiveshell.InteractiveShell.instance().displayhook
    return _displayhook


def record(kernel: str, grid: tuple, block: tuple, smem: int) -> None:
    """Called by every labmagic launch (cheap: a tuple appended to a deque).

    The cell is the one running now, read from its ExecutionResult: ``shell.execution_count`` is not it, since
    IPython 9.10 counts a cell up as it starts (it named the next cell), before that as it ended. A launch
    outside any cell (a thread, a plain script) names none."""
    hook = _displayhook if _displayhook is not None else _find_displayhook()
    result = getattr(hook, "exec_result", None)
    _recent.append((next(_counter), kernel, grid, block, smem, result.execution_count if result is not None else None))


def is_sticky(exc: BaseException) -> bool:
    return bool(_STICKY.search(f"{type(exc).__name__}: {exc}"))


def fault_error(exc: BaseException) -> KernelFaultError:
    """The plain account of a sticky CUDA error, naming the most recent labmagic launches."""
    global _fault
    first = _fault is None
    _fault = _fault or str(exc).strip().splitlines()[0][:200]
    recent = [Launch(*launch) for launch in _recent]
    if recent:
        last = recent[-1]
        where = f" in cell [{last.cell}]" if last.cell is not None else ""
        suspect = (
            f"the last kernel labmagic launched was {last.kernel}<<<{last.grid}, {last.block}, {last.smem}>>> "
            f"(launch #{last.number}{where})"
        )
        earlier = [f"{launch.kernel} (#{launch.number})" for launch in recent[-4:-1]]
        if earlier:
            suspect += f"; before it: {', '.join(reversed(earlier))}"
    else:
        suspect = "no labmagic launch preceded it, so the fault came from a library or Triton/Pallas kernel"
    message = (
        f"a CUDA kernel faulted ({_fault}); {suspect}. The CUDA context is now unusable: every later GPU call in this "
        "process fails. Restart the notebook kernel, then run `%sanitize` on the variant to find the faulting line."
    )
    if not first:
        message = "the CUDA context is still broken from an earlier fault: restart the notebook kernel. " + message
    return KernelFaultError(message)


def no_fault() -> bool:
    """True while no sticky fault is known (the warm launch's one question; :func:`check_context` raises)."""
    return _fault is None


def check_context() -> None:
    """Refuse new launches once a fault is known, instead of adding another confusing error."""
    if _fault is not None:
        raise fault_error(RuntimeError(_fault))
