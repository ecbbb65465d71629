"""Chapter 05's exercises: softmax(RMSNorm(x) * w) in one read of x.

1. ``fused_rows`` (Triton): the row in registers, both reductions on chip.
2. ``fused_row`` (CUDA): a block per row, the row in registers, one paired reduction for sum(x^2) and max(x * w).
"""

from __future__ import annotations

import math

from ..spec import Bar, Case, Exercise, Output
from .draws import odd, randn, scale_rows

EPS = 1e-6


def _shapes(limit: int):
    def shapes(rng, gpu: bool) -> list[tuple[int, ...]]:
        found = [(3, 1), (5, 7), (7, 1000), (odd(rng, 5, 40), odd(rng, 1025, min(limit, 4097)))]
        if gpu:
            found += [(odd(rng, 200, 600), odd(rng, limit // 2 + 1, limit - 1)),
                      (odd(rng, 1000, 3000), odd(rng, 300, 3000))]
        return found
    return shapes


def _case(shape, generator, device) -> Case:
    """Row 0 x100 and row 1 x1e-4 (the norm undoes both: eps shows in the second), row 2 holds one -inf: RMSNorm
    makes it NaN there (-inf * 0), and the softmax of a row holding NaN is NaN throughout, as torch's."""
    import torch

    rows, cols = shape
    x = randn((rows, cols), generator, device)
    notes = scale_rows(x)
    if rows > 2:
        x[2, int(torch.randint(cols, (1,), generator=generator, device=device))] = -math.inf
        notes.append("row 2 holds -inf")
    w = 1 + 0.5 * torch.rand(cols, generator=generator, device=device)
    out = Output("out", (rows, cols), "float32", rtol=1e-4, atol=1e-9, poison=math.inf, exact_nonfinite=True)
    return Case((x, w, EPS), (out,), note=", ".join(notes))


def _reference(x, w, eps):
    import torch

    xd = x.double()
    y = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps) * w.double()
    out = torch.softmax(y, dim=-1)
    # A NaN anywhere in a row makes the whole row NaN (the sum carries it), whatever a library's max does with NaN.
    return (torch.where(torch.isnan(y).any(-1, keepdim=True), torch.full_like(out, math.nan), out).float(),)


def _fused(name: str, title: str, language: str, limit: int, bar: Bar, sass=()) -> Exercise:
    return Exercise(
        name=name, chapter="05_fused_softmax_rmsnorm", title=title, language=language, entry=name,
        signature=f"{name}(x, w, eps, out)", shapes=_shapes(limit), make_case=_case, reference=_reference, bar=bar,
        nbytes=lambda rows, cols: 8 * rows * cols + 4 * cols, flops=lambda rows, cols: 9 * rows * cols,
        requires_sass=sass, sanitize_shape=(7, 1000),
    )


EXERCISES = [
    _fused("fused_rows", "softmax(RMSNorm(x) * w) with the row in registers", "triton", 16384,
           Bar((65536, 4096), 0.85, "triton", "float32")),
    _fused("fused_row", "One read, one paired reduction, in CUDA", "cuda", 4096, Bar((65536, 4096), 0.80),
           (("SHFL.BFLY", "butterfly warp shuffles"), ("MUFU.EX2", "exponentials"),
            ("MUFU.RSQ", "the reciprocal square root"))),
]
