"""JAX and Pallas timed on the device clock (CudaTimer's ``cupti`` method) on a real GPU.

The assertions are about what the method measures, not about speed: a JAX add must take about as long
as torch's add of the same bytes (the same memory-bound work), and on a tiny array, where JAX's host
dispatch dominates, the device span must be far below the figure by blocking.
"""

from __future__ import annotations

import pytest

import labmagic  # noqa: F401 - configures JAX to share the GPU with torch before JAX starts
from labmagic.timing import CudaTimer

pytestmark = pytest.mark.gpu


def _jax_sets(n, sets=2):
    import jax

    keys = jax.random.split(jax.random.key(0), 2 * sets)
    return [(jax.random.normal(keys[2 * i], (n,)), jax.random.normal(keys[2 * i + 1], (n,))) for i in range(sets)]


def _torch_sets(n, sets=2):
    import torch

    return [(torch.randn(n, device="cuda"), torch.randn(n, device="cuda")) for _ in range(sets)]


def _torch_add_ms(n):
    import torch

    timing = CudaTimer(rep_ms=50).time(torch.add, _torch_sets(n), set_bytes=12 * n)
    assert timing.method == "cuda_event"
    return timing.median_ms


def _pallas_add_on_torch_tensors():
    """Chapter 01's Pallas row: a Triton-lowered Pallas add, wrapped to take and return torch tensors
    (so ``block_until_ready`` cannot see the JAX result)."""
    import jax
    from jax.experimental import pallas as pl

    from labmagic.pallas import to_jax, to_torch

    block = 1024

    def body(a_ref, b_ref, c_ref):
        c_ref[...] = a_ref[...] + b_ref[...]

    def spec():
        return pl.BlockSpec((block,), lambda i: (i,))

    @jax.jit
    def add(a, b):
        return labmagic.pallas_call(body, out_shape=jax.ShapeDtypeStruct(a.shape, a.dtype),
                                    grid=(pl.cdiv(a.shape[0], block),), in_specs=[spec(), spec()],
                                    out_specs=spec())(a, b)

    return lambda a, b: to_torch(add(to_jax(a), to_jax(b)))


def test_jax_add_on_the_device_clock_matches_torch_add_of_the_same_bytes():
    import jax
    import numpy as np

    n = 2**24
    sets = _jax_sets(n)
    timing = CudaTimer(rep_ms=50).time(jax.jit(jax.numpy.add), sets, blocking=True, set_bytes=12 * n)
    assert timing.method == "cupti", timing.notes
    a, b = sets[timing.output_set]
    np.testing.assert_allclose(np.asarray(timing.output), np.asarray(a) + np.asarray(b), rtol=1e-6)
    torch_ms = _torch_add_ms(n)
    assert torch_ms / 1.3 < timing.median_ms < 1.3 * torch_ms, (timing.median_ms, torch_ms)
    assert timing.host_blocking_ms > timing.median_ms


def test_pallas_add_on_torch_tensors_is_timed_on_the_device_clock():
    import torch

    n = 2**24
    sets = _torch_sets(n)
    timing = CudaTimer(rep_ms=50).time(_pallas_add_on_torch_tensors(), sets, blocking=True, set_bytes=12 * n)
    assert timing.method == "cupti", timing.notes
    a, b = sets[timing.output_set]
    torch.testing.assert_close(timing.output, a + b)
    torch_ms = _torch_add_ms(n)
    assert torch_ms / 1.3 < timing.median_ms < 1.3 * torch_ms, (timing.median_ms, torch_ms)


def test_tiny_jax_call_is_not_charged_for_dispatch():
    import jax

    n = 2**12
    add, sets = jax.jit(jax.numpy.add), _jax_sets(n)
    device = CudaTimer(rep_ms=20).time(add, sets, blocking=True, set_bytes=12 * n)
    blocking = CudaTimer(rep_ms=20, use_cupti=False).time(add, sets, blocking=True, set_bytes=12 * n)
    assert device.method == "cupti" and blocking.method == "cuda_event_blocking"
    assert 0 < device.median_ms < 0.5 * blocking.median_ms, (device.median_ms, blocking.median_ms)
    assert device.max_ms < blocking.median_ms  # not one call's span holds the dispatch
