"""Chapter 06's exercises: GEMM on the tensor cores, C = A B^T with B stored N x K (an nn.Linear weight).

1. ``matmul_fp16`` (Triton): a tiled ``tl.dot`` loop, fp32 accumulation (Triton emits wgmma on Hopper).
2. ``wmma_gemm`` (CUDA): the chapter's rung 1, WMMA fragments from shared memory.
3. ``wgmma_desc`` (CUDA, sm_90a): the shared-memory descriptor ``wgmma`` reads a 128-byte-swizzled tile through,
   plugged into the chapter's rung 3 (TMA and wgmma), which is given.
"""

from __future__ import annotations

from ..spec import Bar, Case, Exercise, Output
from .draws import odd, randn


def _triton_shapes(rng, gpu: bool) -> list[tuple[int, ...]]:
    found = [(1, 1, 1), (31, 17, 29), (64, 48, 40), (odd(rng, 20, 100), odd(rng, 20, 100), odd(rng, 16, 120))]
    if gpu:
        found += [(odd(rng, 500, 1100), odd(rng, 500, 1100), odd(rng, 500, 1100))]
    return found


def _cuda_shapes(rng, gpu: bool) -> list[tuple[int, ...]]:
    """(M, N, K) with K a multiple of 8: 16-byte rows, what 16-byte loads and TMA's row pitch need."""
    found = [(1, 1, 8), (31, 17, 24), (127, 255, 64), (odd(rng, 100, 300), odd(rng, 100, 300), 8 * odd(rng, 3, 40))]
    if gpu:
        found += [(odd(rng, 900, 1100), odd(rng, 900, 1100), 8 * odd(rng, 100, 140))]
    return found


def _case(dtype: str):
    def make(shape, generator, device) -> Case:
        import torch

        M, N, K = shape
        s = K ** -0.25  # every entry of C is O(1) at any K
        t = getattr(torch, dtype)
        A = randn((M, K), generator, device, t, scale=s)
        B = randn((N, K), generator, device, t, scale=s)
        # One 16-bit rounding of an fp32 sum: 2**-8 relative in bf16, 2**-11 in fp16.
        return Case((A, B), (Output("C", (M, N), dtype, rtol=1e-2, atol=1e-3),))
    return make


def _reference(A, B):
    return ((A.double() @ B.double().t()),)


def _nbytes(M, N, K):
    return 2 * (M * K + N * K + M * N)


def _flops(M, N, K):
    return 2 * M * N * K


EXERCISES = [
    Exercise(
        name="matmul_fp16", chapter="06_tensor_core_gemm", title="A tiled tl.dot GEMM in fp16", language="triton",
        entry="matmul_fp16", signature="matmul_fp16(A, B, C)", shapes=_triton_shapes, make_case=_case("float16"),
        reference=_reference, bar=Bar((4096, 4096, 4096), 0.80, "triton", "float16"), nbytes=_nbytes, flops=_flops,
    ),
    Exercise(
        name="wmma_gemm", chapter="06_tensor_core_gemm", title="WMMA fragments from shared memory", language="cuda",
        entry="wmma_gemm", signature="wmma_gemm(A, B, C)", shapes=_cuda_shapes, make_case=_case("bfloat16"),
        reference=_reference, bar=Bar((4096, 4096, 4096), 0.85, "cuda_wmma", "bfloat16"), nbytes=_nbytes,
        flops=_flops, requires_sass=(("HMMA", "tensor-core multiply-adds"),), sanitize_shape=(127, 255, 64),
    ),
    Exercise(
        name="wgmma_desc", chapter="06_tensor_core_gemm", title="The wgmma descriptor of a swizzled tile",
        language="cuda", entry="wgmma_desc", signature="wgmma_desc(A, B, C)", shapes=_cuda_shapes,
        make_case=_case("bfloat16"), reference=_reference,
        bar=Bar((4096, 4096, 4096), 0.90, "cuda_wgmma_tma", "bfloat16"), nbytes=_nbytes, flops=_flops,
        requires_sass=(("HGMMA", "wgmma"),), arch="sm_90a", sanitize_shape=(127, 255, 64),
    ),
]
