"""The IPython extension: registers every magic and shows labmagic's errors as one line; in a kernel (a notebook,
papermill), Python warnings as one line too, without the path of the file that raised them
(:mod:`labmagic.display.warning_line`).

Each magic module exposes ``register(ipython)``; this loader is the only place that knows the list.
"""

from __future__ import annotations

import importlib
import sys

from ..compiler import faults
from ..display import warning_line
from ..errors import LabError
from ..runtime import SETUP_NOTES

#: Modules whose ``register(ipython)`` adds magics: %%cuda_kernel, %bench, %ncu / %sanitize, %triton_panel, %%dsl,
#: %exercise.
MAGIC_MODULES = ("labmagic.magics.cuda_kernel", "labmagic.magics.bench_magic", "labmagic.magics.tool_magics",
                 "labmagic.magics.triton_magic", "labmagic.magics.dsl_magic", "labmagic.magics.exercise_magic")


def _show_lab_error(shell, etype, value, tb, tb_offset=None):
    """A LabError reads as ``Name: message`` plus its detail (a compiler log), never as a traceback.

    A RuntimeError from any library (torch, CuPy, JAX) that carries a sticky CUDA error (illegal
    address, launch failure, ...) is the delayed report of a faulting kernel: it is replaced by the
    plain account from ``faults``. Any other RuntimeError keeps IPython's usual traceback.
    """
    if not isinstance(value, LabError):
        if not faults.is_sticky(value):
            stb = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
            shell._showtraceback(etype, value, stb)
            return stb
        value = faults.fault_error(value)
        etype = type(value)
    stb = [f"\x1b[0;31m{etype.__name__}\x1b[0m: {value}"]
    detail = getattr(value, "detail", "")
    if detail:
        stb.append(detail.rstrip())
    shell._showtraceback(etype, value, stb)  # ipykernel publishes it as the cell's error output
    return stb


def load_ipython_extension(ipython) -> None:
    for name in MAGIC_MODULES:
        importlib.import_module(name).register(ipython)
    ipython.set_custom_exc((LabError, RuntimeError), _show_lab_error)
    if getattr(ipython, "kernel", None) is not None:  # a Jupyter kernel, whose output a notebook keeps
        warning_line.install()
    for note in SETUP_NOTES:
        print(f"labmagic: {note}", file=sys.stderr if "before labmagic" in note else sys.stdout)
