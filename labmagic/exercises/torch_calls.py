"""Which torch operators a submission calls itself, while it runs.

An exercise asks for the reader's own kernel; ``torch.add``, ``F.softmax`` or ``A @ B`` inside the submission would
hand the work to torch (the chapter's reference, or cuBLAS). The judge runs each call under a
``TorchDispatchMode`` that sees every aten operator as torch dispatches it, on the CPU and the GPU alike, and
attributes it to its caller: the innermost Python frame outside torch's own package. An operator whose caller is
one of the submission's cells (the judge compiles them under file names of its own, :data:`CELL_PREFIX`) is the
submission's; one called from Triton's interpreter, labmagic's launcher or anything else the submission did not
write is not (Triton's interpreter copies tensors with ``aten::copy_`` on a CPU: that is not the reader's call).

The submission may allocate (``torch.empty``, ``zeros``, ``full``, ``fill_``) and take views (``view``, ``t``,
``transpose``, slices); any other operator is refused, naming it. Limits: a submission that computes with another
library without calling torch (numpy on host copies, CuPy) is not seen here; :mod:`.source_rules` refuses its
imports, and on a GPU :mod:`.kernel_trace` sees the kernels it launched.
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass, field

#: File names the judge compiles a submission's cells under (``<exercise cell 1>``).
CELL_PREFIX = "<exercise cell "

#: aten operators a submission may call: allocation, filling, views. Nothing here computes a result.
ALLOWED = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "new_zeros",
    "zero_", "fill_", "full", "full_like", "new_full", "ones", "ones_like", "new_ones",
    "view", "_unsafe_view", "_reshape_alias", "as_strided", "t", "transpose", "permute", "expand", "select",
    "slice", "unsqueeze", "squeeze", "alias", "detach", "split", "split_with_sizes", "unbind", "narrow",
    "view_as", "lift_fresh", "resolve_conj", "resolve_neg", "unflatten", "flatten",
})


@dataclass
class TorchCalls:
    """What the monitor saw: each refused operator once, with the cell line that called it."""

    refused: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        """``calls torch itself: aten::add (cell 2, line 7), aten::mm (cell 2, line 9)``."""
        listed = ", ".join(f"aten::{op} ({where})" for op, where in self.refused.items())
        return f"calls torch itself: {listed}; the exercise asks for your own kernel"


def caller(frame) -> str | None:
    """The submission cell and line that called into torch, or None when the caller is not the submission."""
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(CELL_PREFIX):
            return f"{name[1:-1].removeprefix('exercise ')}, line {frame.f_lineno}"
        if not _inside_torch(name) and not _is_this_module(name):
            return None
        frame = frame.f_back
    return None


@functools.cache
def _torch_dir() -> str:
    import torch

    return os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


def _inside_torch(filename: str) -> bool:
    """A frame of torch's own package (a path test, not a substring: a venv may live under /opt/torch/)."""
    return filename.startswith(_torch_dir()) or filename.startswith("<frozen")


def _is_this_module(filename: str) -> bool:
    return filename == __file__


def monitor(calls: TorchCalls, allowed: frozenset[str] = frozenset()):
    """A context manager that records into ``calls`` every operator the submission calls beyond ``ALLOWED`` and
    ``allowed``. The operator still runs: the grade says what was called, the call is not changed."""
    from torch.utils._python_dispatch import TorchDispatchMode

    permitted = ALLOWED | allowed

    class _Monitor(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            op = func.overloadpacket.__name__
            if op not in permitted and op not in calls.refused:
                where = caller(sys._getframe(1))
                if where is not None:
                    calls.refused[op] = where
            return func(*args, **(kwargs or {}))

    return _Monitor()
