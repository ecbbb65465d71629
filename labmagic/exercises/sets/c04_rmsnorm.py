"""Chapter 04's exercises: RMSNorm, one statistic per row.

1. ``rmsnorm_rows`` (Triton): the row in registers, float32.
2. ``rmsnorm_warp`` (CUDA): one row per warp, 16-byte loads of bf16, five shuffles and no barrier.
"""

from __future__ import annotations

import math

from ..spec import Bar, Case, Exercise, Output
from .draws import odd, randn, scale_rows

EPS = 1e-6


def _shapes(rng, gpu: bool) -> list[tuple[int, ...]]:
    found = [(3, 1), (5, 7), (7, 1000), (odd(rng, 5, 40), odd(rng, 1025, 4097))]
    if gpu:
        found += [(odd(rng, 200, 600), odd(rng, 8193, 16383)), (odd(rng, 1000, 3000), odd(rng, 300, 3000))]
    return found


def _vector_shapes(rng, gpu: bool) -> list[tuple[int, ...]]:
    """cols a multiple of 8: every bf16 row starts on a 16-byte boundary."""
    found = [(3, 8), (5, 16), (7, 1000), (odd(rng, 9, 40), 8 * odd(rng, 100, 600))]
    if gpu:
        found += [(odd(rng, 1000, 5000), 8 * odd(rng, 64, 1023)), (odd(rng, 100, 300), 8 * odd(rng, 1025, 2047))]
    return found


def _planted(x, generator):
    """Row 0 x100, row 1 x1e-4 (there mean(x^2) ~ 1e-8 and eps dominates: a misplaced eps shows), row 2 with one +inf
    (an infinite norm: rsqrt(inf) = 0, so NaN where x is infinite and 0 elsewhere)."""
    import torch

    rows, cols = x.shape
    notes = scale_rows(x)
    if rows > 2:
        x[2, int(torch.randint(cols, (1,), generator=generator, device=x.device))] = math.inf
        notes.append("row 2 holds +inf")
    return ", ".join(notes)


def _case(dtype: str, tol: float):
    def make(shape, generator, device) -> Case:
        import torch

        rows, cols = shape
        x = randn((rows, cols), generator, device)
        note = _planted(x, generator)
        w = 1 + 0.1 * randn((cols,), generator, device)
        torch_dtype = getattr(torch, dtype)
        out = Output("y", (rows, cols), dtype, rtol=tol, atol=1e-6, poison=math.inf, exact_nonfinite=True)
        return Case((x.to(torch_dtype), w.to(torch_dtype), EPS), (out,), note=note)
    return make


def _reference(x, w, eps):
    import torch

    xd = x.double()
    r = torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps)
    return ((xd * r * w.double()).to(x.dtype),)


EXERCISES = [
    Exercise(
        name="rmsnorm_rows", chapter="04_rmsnorm", title="RMSNorm with the row in registers", language="triton",
        entry="rmsnorm_rows", signature="rmsnorm_rows(x, w, eps, y)", shapes=_shapes,
        make_case=_case("float32", 1e-4), reference=_reference,
        bar=Bar((65536, 4096), 0.85, "triton", "float32"),
        nbytes=lambda rows, cols: 8 * rows * cols + 4 * cols, flops=lambda rows, cols: 4 * rows * cols,
    ),
    Exercise(
        name="rmsnorm_warp", chapter="04_rmsnorm", title="One bf16 row per warp", language="cuda",
        entry="rmsnorm_warp", signature="rmsnorm_warp(x, w, eps, y)", shapes=_vector_shapes,
        make_case=_case("bfloat16", 1e-2), reference=_reference,
        bar=Bar((262144, 1024), 0.90, "cuda_warp", "bfloat16"),
        nbytes=lambda rows, cols: 4 * rows * cols + 2 * cols, flops=lambda rows, cols: 4 * rows * cols,
        requires_sass=(("SHFL.BFLY", "butterfly warp shuffles"), ("MUFU.RSQ", "the reciprocal square root"),
                       ("LDG.E.128", "16-byte loads")),
        sanitize_shape=(7, 1000),
    ),
]
