"""Which compiler turns a ``%%cuda_kernel`` cell into a GPU binary: chosen here, in one place, for every caller.

Today there is one backend, NVRTC (:mod:`.nvrtc`), which compiles CUDA C++ to a CUBIN for an NVIDIA GPU. The platform
that launches the kernel is torch's (a launch goes on torch's current stream), so torch decides: a ROCm build of
torch (``torch.version.hip`` set) runs on an AMD GPU, where a CUBIN is useless and the compiler would be hipRTC
(HIP C++ to a code object for the GPU's ``gfx`` architecture). That track is not built yet, so on ROCm
:func:`compiler` refuses in one line that says so, before NVRTC is reached and fails in a way that names neither
the platform nor the way forward. The book's Methods page "Porting to ROCm" says what the HIP track would change.

Kernels for another vendor would sit beside the CUDA ones, as a backend of their own here; they are never
translated from CUDA.
"""

from __future__ import annotations

import importlib.util
import sys

from ..errors import LabError

NVRTC = "nvrtc"
#: The compiler the HIP track would use (not built yet).
HIPRTC = "hiprtc"


class BackendUnavailable(LabError, RuntimeError):
    """This machine's platform needs a compile backend that labmagic does not have yet."""


def hip_version() -> str | None:
    """``torch.version.hip`` of the torch this process uses (a ROCm build), else None (a CUDA or CPU build, or no
    torch installed: then nothing here launches on an AMD GPU)."""
    torch = sys.modules.get("torch")
    if torch is None:
        if importlib.util.find_spec("torch") is None:
            return None
        import torch
    return getattr(getattr(torch, "version", None), "hip", None) or None


def compile_backend() -> str:
    """:data:`HIPRTC` under a ROCm build of torch, else :data:`NVRTC`."""
    return HIPRTC if hip_version() else NVRTC


def compiler():
    """The compile function of this machine's backend (:func:`labmagic.compiler.nvrtc.compile`); on ROCm a
    :class:`BackendUnavailable` that says in one line what is missing and what it would compile with."""
    backend = compile_backend()
    if backend == NVRTC:
        from . import nvrtc

        return nvrtc.compile
    raise BackendUnavailable(refusal(hip_version()))


def refusal(hip: str | None) -> str:
    """What a compile says under a ROCm build of torch whose HIP version is ``hip``."""
    return (f"this torch is a ROCm build (HIP {hip}): the HIP track is not built yet, so CUDA C++ cells do not "
            "compile here. On ROCm a cell would compile with hipRTC (HIP C++ for the GPU's gfx architecture) where "
            "NVRTC compiles CUDA C++ for NVIDIA GPUs; see the book's Methods page \"Porting to ROCm\"")
