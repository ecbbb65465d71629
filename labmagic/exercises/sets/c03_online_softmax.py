"""Chapter 03's exercises: the online softmax, from its merge rule to a CUDA kernel.

1. ``online_merge`` (Triton): merge two partial states ``(m, d)`` per row, empty states included.
2. ``softmax_rows`` (Triton): a row softmax with the row in registers, masked rows as torch treats them.
3. ``softmax_online`` (CUDA): the two-pass online softmax, a block per row, states merged by warp shuffles.
"""

from __future__ import annotations

import math

from ..spec import Bar, Case, Exercise, Output
from .draws import odd, randn

NEG_INF = -math.inf


# -- 1. online_merge ------------------------------------------------------------------------------------------------

def _merge_shapes(rng, gpu: bool) -> list[tuple[int, ...]]:
    rows = [1, 2, 5, odd(rng, 100, 3000), odd(rng, 10_000, 40_000)]
    if gpu:
        rows += [odd(rng, 1_000_000, 3_000_000)]
    return [(r,) for r in rows]


def _merge_case(shape, generator, device) -> Case:
    import torch

    (rows,) = shape
    m_a, m_b = randn((rows,), generator, device, scale=5.0), randn((rows,), generator, device, scale=5.0)
    d_a = 1 + 99 * torch.rand(rows, generator=generator, device=device)
    d_b = 1 + 99 * torch.rand(rows, generator=generator, device=device)
    planted = [(0, "a empty"), (1, "b empty"), (2, "both empty"), (3, "equal maxima"), (4, "far apart")]
    for row, what in planted[:rows]:
        if what in ("a empty", "both empty"):
            m_a[row], d_a[row] = NEG_INF, 0.0
        if what in ("b empty", "both empty"):
            m_b[row], d_b[row] = NEG_INF, 0.0
        if what == "equal maxima":
            m_b[row] = m_a[row]
        if what == "far apart":
            m_a[row], m_b[row] = 80.0, -80.0
    outs = (Output("m", (rows,), "float32", exact_nonfinite=True),
            Output("d", (rows,), "float32", rtol=1e-4, atol=1e-6, exact_nonfinite=True))
    return Case((m_a, d_a, m_b, d_b), outs, note="empty states planted" if rows > 2 else "")


def _merge_ref(m_a, d_a, m_b, d_b):
    import torch

    ma, da, mb, db = (t.double() for t in (m_a, d_a, m_b, d_b))
    M = torch.maximum(ma, mb)

    def rescale(m):  # exp(m - M), 0 for an empty state (m = -inf), never exp(-inf + inf)
        return torch.where(m == NEG_INF, torch.zeros_like(m), torch.exp(m - M))

    return M.float(), (da * rescale(ma) + db * rescale(mb)).float()


ONLINE_MERGE = Exercise(
    name="online_merge", chapter="03_online_softmax", title="The merge rule of two partial states",
    language="triton", entry="online_merge", signature="online_merge(m_a, d_a, m_b, d_b, m, d)",
    shapes=_merge_shapes, make_case=_merge_case, reference=_merge_ref,
    bar=Bar((2**26,), 0.80), nbytes=lambda rows: 24 * rows, flops=lambda rows: 8 * rows,
    shape_text=lambda s: f"{s[0]} rows",
)


# -- 2 and 3: a softmax over rows -----------------------------------------------------------------------------------

def _softmax_shapes(limit: int):
    def shapes(rng, gpu: bool) -> list[tuple[int, ...]]:
        found = [(3, 1), (4, 7), (7, 1000), (odd(rng, 3, 40), odd(rng, 1025, 4097))]
        if gpu:
            found += [(odd(rng, 200, 600), odd(rng, 8193, limit - 1)), (odd(rng, 1000, 3000), odd(rng, 300, 3000))]
        return found
    return shapes


def _softmax_case(shape, generator, device) -> Case:
    """Fresh rows with a large row (its exps overflow unless the max is subtracted), a partly masked row and a
    fully masked one (NaN, as torch); the output is poisoned with +inf, which a softmax never is."""
    rows, cols = shape
    x = randn((rows, cols), generator, device)
    notes = []
    if rows > 0:
        x[0] *= 100
        notes.append("row 0 x100")
    if rows > 1:
        x[1, ::3] = NEG_INF
        notes.append("row 1 every third -inf")
    if rows > 2:
        x[2] = NEG_INF
        notes.append("row 2 all -inf")
    out = Output("y", (rows, cols), "float32", rtol=1e-4, atol=1e-9, poison=math.inf, exact_nonfinite=True)
    return Case((x,), (out,), note=", ".join(notes))


def _softmax_ref(x):
    import torch

    return (torch.softmax(x.double(), dim=-1).float(),)


def _softmax(name: str, title: str, language: str, bar: Bar, limit: int, sass=()) -> Exercise:
    return Exercise(
        name=name, chapter="03_online_softmax", title=title, language=language, entry=name,
        signature=f"{name}(x, y)", shapes=_softmax_shapes(limit), make_case=_softmax_case, reference=_softmax_ref,
        bar=bar, nbytes=lambda rows, cols: 8 * rows * cols, flops=lambda rows, cols: 5 * rows * cols,
        requires_sass=sass, sanitize_shape=(7, 4097),
    )


EXERCISES = [
    ONLINE_MERGE,
    _softmax("softmax_rows", "A row softmax with the row in registers", "triton",
             Bar((65536, 4096), 0.85, "triton", "float32"), limit=16384),
    _softmax("softmax_online", "The two-pass online softmax in CUDA", "cuda",
             Bar((65536, 4096), 0.90, "cuda_online", "float32"), limit=70000,
             sass=(("SHFL.BFLY", "butterfly warp shuffles"), ("MUFU.EX2", "exponentials"))),
]
