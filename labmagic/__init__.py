"""Kernel Lab's notebook toolkit.

``%load_ext labmagic`` (or ``import labmagic``) before importing triton or jax: on a machine without a
GPU this switches Triton to its interpreter and JAX to the CPU, and on any machine it stops JAX from
pre-allocating most of the GPU next to torch.
"""

from __future__ import annotations

from . import runtime as _runtime

_runtime.configure()
#: Notes for the reader produced while configuring the environment (printed by ``%load_ext``).
SETUP_NOTES = _runtime.SETUP_NOTES

from .dsl import DSLUnavailable  # noqa: E402
from .errors import ArgumentError, CompileError, LabError, NoGPUError, UnsupportedInput  # noqa: E402
from .runtime import cdiv, device_slug, has_gpu, next_power_of_2, require_tensor, target_arch, torch_device  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "ArgumentError", "CompileError", "DSLUnavailable", "LabError", "NoGPUError", "Race",
    "bench", "cdiv", "check_cases", "check_variants", "compile_cuda", "cubin_panel", "device_slug", "has_gpu", "kernel",
    "pallas_call",
    "next_power_of_2", "race_figure", "require_tensor", "target_arch",
    "torch_device", "triton_panel", "UnsupportedInput",
]


def check_cases(cases, check, **kwargs):
    """A chapter's own correctness table: ``check(variant, *shape, seed=, dtype=)`` for each ``(name, variant, shape,
    dtype)`` case, a row each, every mismatch named in one AssertionError at the end (see
    :func:`labmagic.benchmark.case_checks.check_cases`)."""
    from .benchmark.case_checks import check_cases as _check_cases

    return _check_cases(cases, check, **kwargs)


def compile_cuda(source, **kwargs):
    """Compile CUDA C++ with NVRTC and return a :class:`labmagic.compiler.kernel.CudaModule` (see
    :func:`labmagic.compiler.nvrtc.compile`)."""
    from .compiler.kernel import compile_module

    return compile_module(source, **kwargs)


def bench(*args, **kwargs):
    """Run a race (see :func:`labmagic.benchmark.runner.bench`)."""
    from .benchmark.runner import bench as _bench

    return _bench(*args, **kwargs)


def check_variants(*args, **kwargs):
    """A chapter's own check over its variants, dtypes and shapes, as a table (see
    :func:`labmagic.benchmark.check_table.check_variants`)."""
    from .benchmark.check_table import check_variants as _check_variants

    return _check_variants(*args, **kwargs)


def pallas_call(*args, **kwargs):
    """``jax.experimental.pallas.pallas_call`` that runs natively on a GPU and in interpret mode on CPU."""
    from .pallas import pallas_call as _pallas_call

    return _pallas_call(*args, **kwargs)


def triton_panel(*args, **kwargs):
    """Compile a ``@triton.jit`` kernel without launching it and show its IRs, SASS, resources and occupancy
    (see :func:`labmagic.analysis.triton_panel.triton_panel`)."""
    from .analysis.triton_panel import triton_panel as _triton_panel

    return _triton_panel(*args, **kwargs)


def cubin_panel(*args, **kwargs):
    """The compile panel of a CUBIN another compiler built (TileLang, CuTeDSL): registers, shared memory, occupancy
    and SASS, without a GPU (see :func:`labmagic.analysis.cubin_panel.cubin_panel`)."""
    from .analysis.cubin_panel import cubin_panel as _cubin_panel

    return _cubin_panel(*args, **kwargs)


def kernel(chapter, name, race=None, parameters=None):
    """A chapter's variant as a Python callable, compiled through the same cache as in the notebook:
    ``labmagic.kernel("07_attention", "cuda_wgmma_pingpong")(q, k, v, causal=True)`` returns ``(o, lse)``
    (see :mod:`labmagic.execute.library`)."""
    from .execute.library import kernel as _kernel

    return _kernel(chapter, name, race=race, parameters=parameters)


def race_figure(chapter, **kwargs):
    """A chapter's race figure from its CSV in ``results/``: the panels the book names for it, two across, legends of
    at most eight families (see :func:`labmagic.display.chapters.race_figure`)."""
    from .display.chapters import race_figure as _race_figure

    return _race_figure(chapter, **kwargs)


def __getattr__(name):
    # Lazy: `labmagic.Race` without importing the benchmark machinery (and torch) at import time.
    if name == "Race":
        from .benchmark import Race

        return Race
    raise AttributeError(f"module 'labmagic' has no attribute {name!r}")


def load_ipython_extension(ipython):
    from .magics import load_ipython_extension as _load

    _load(ipython)
