"""Chapter 02's exercises: fp32 GEMM on the CUDA cores, each rebuilding a rung of the chapter's ladder and judged
against that rung's measured speed.

1. ``sgemm_coalesced``: one thread per output, ``threadIdx.x`` along a row of C (rung 2).
2. ``sgemm_smem``: 32x32 tiles staged in shared memory, with the two barriers (rung 3).
3. ``sgemm_regtile``: a 128x128 block tile and an 8x8 register tile per thread (rung 5), from a stub.
"""

from __future__ import annotations

from ..spec import Bar, Case, Exercise, Output
from .draws import odd, randn


def _shapes(rng, gpu: bool) -> list[tuple[int, ...]]:
    """(M, N, K): odd sizes that divide no tile, one of each dimension alone, and one drawn at random."""
    shapes = [(1, 1, 1), (31, 17, 29), (127, 255, 63), (odd(rng, 100, 300), odd(rng, 100, 300), odd(rng, 20, 300))]
    if gpu:
        shapes += [(odd(rng, 900, 1100), odd(rng, 900, 1100), odd(rng, 900, 1100))]
    return shapes


def _case(shape, generator, device) -> Case:
    M, N, K = shape
    s = K ** -0.25  # every entry of C is O(1) at any K, as in the chapter
    A = randn((M, K), generator, device, scale=s)
    B = randn((K, N), generator, device, scale=s)
    # fp32 sums of K terms are a few eps * sqrt(K) off float64; a TF32 product would be ~1e-3 off and fail.
    return Case((A, B), (Output("C", (M, N), "float32", rtol=1e-4, atol=1e-4),))


def _reference(A, B):
    return ((A.double() @ B.double()).float(),)


def _gemm(name: str, title: str, bar: Bar, sass: tuple) -> Exercise:
    return Exercise(
        name=name, chapter="02_sgemm", title=title, language="cuda", entry=name, signature=f"{name}(A, B, C)",
        shapes=_shapes, make_case=_case, reference=_reference, bar=bar,
        nbytes=lambda M, N, K: 4 * (M * K + K * N + M * N), flops=lambda M, N, K: 2 * M * N * K,
        requires_sass=sass, sanitize_shape=(127, 255, 63),
    )


FFMA = ("FFMA", "fp32 fused multiply-adds")
EXERCISES = [
    _gemm("sgemm_coalesced", "One thread per output, coalesced", Bar((2048, 2048, 2048), 0.90, "cuda_coalesced",
                                                                       "float32"), (FFMA,)),
    _gemm("sgemm_smem", "32x32 tiles in shared memory", Bar((4096, 4096, 4096), 0.90, "cuda_smem", "float32"),
          (FFMA, ("LDS", "loads from shared memory"), ("BAR.SYNC", "__syncthreads"))),
    _gemm("sgemm_regtile", "An 8x8 register tile per thread", Bar((4096, 4096, 4096), 0.85, "cuda_blocktile_2d",
                                                                   "float32"),
          (FFMA, ("LDS", "loads from shared memory"), ("BAR.SYNC", "__syncthreads"))),
]
