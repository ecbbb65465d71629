"""Chapter 08's exercises: INT8 quantization and GEMM.

1. ``quantize_rows`` (Triton): symmetric per-row absmax quantization, IEEE division, round half to even.
2. ``dequantize_bf16`` (CUDA): int8 codes times their row's scale, as bf16, 16 codes per load.
3. ``int8_gemm`` (Triton): int8 x int8 -> int32 on the tensor cores, B stored N x K.
"""

from __future__ import annotations

import math

from ..spec import Bar, Case, Exercise, Output
from .draws import odd, randn

#: The chapter's tie row: scale exactly 1, every quotient a half-integer, so round half to even decides each code.
TIE = [127.0, 0.5, 1.5, 2.5, -0.5, -2.5, 3.5, -126.5, 125.5]


# -- 1. quantize_rows -----------------------------------------------------------------------------------------------

def _quant_shapes(rng, gpu: bool) -> list[tuple[int, ...]]:
    found = [(6, 1), (7, 3), (9, 1000), (8, odd(rng, 1025, 4097)), (odd(rng, 6, 30), odd(rng, 100, 900))]
    if gpu:
        found += [(odd(rng, 100, 300), odd(rng, 8193, 16383)), (odd(rng, 2000, 6000), odd(rng, 300, 3000))]
    return found


def _quant_case(shape, generator, device) -> Case:
    """The chapter's planted rows: 0 all zeros, 1 holds +inf, 2 NaN, 3 -inf, 4 the tie row, 5 x1000."""
    import torch

    rows, cols = shape
    x = randn((rows, cols), generator, device, scale=3.0)
    j = int(torch.randint(cols, (1,), generator=generator, device=device))
    plants = {0: "zeros", 1: "+inf", 2: "NaN", 3: "-inf", 4: "ties", 5: "x1000"}
    for row in range(min(rows, 6)):
        if row == 0:
            x[0] = 0
        elif row == 1:
            x[1, j] = math.inf
        elif row == 2:
            x[2, (j * 7) % cols] = math.nan
        elif row == 3:
            x[3, (j * 3) % cols] = -math.inf
        elif row == 4:
            x[4] = torch.tensor(TIE, device=device).repeat(cols // len(TIE) + 1)[:cols]
            x[4, 0] = 127.0
        else:
            x[5] *= 1000
    outs = (Output("q", (rows, cols), "int8"),
            Output("scale", (rows,), "float32", poison=-1.0, exact_nonfinite=True))
    return Case((x,), outs, note="rows: " + ", ".join(plants[r] for r in range(min(rows, 6))))


def _quant_ref(x):
    """The chapter's torch composition: rows with inf or NaN get scale NaN, all-zero rows scale 0, both codes 0; an
    IEEE division by a tensor (torch's CUDA `amax / 127` multiplies by a rounded 1/127 instead)."""
    import torch

    xf = x.float()
    amax = xf.abs().amax(-1)
    s = torch.where(torch.isfinite(amax), amax / torch.full_like(amax, 127.0), torch.full_like(amax, math.nan))
    ok = (s > 0)[:, None]
    codes = torch.round(xf / torch.where(ok, s[:, None], 1.0)).clamp_(-127, 127)
    return torch.where(ok, codes, 0.0).to(torch.int8), s


# -- 2. dequantize_bf16 ---------------------------------------------------------------------------------------------

def _dequant_shapes(rng, gpu: bool) -> list[tuple[int, ...]]:
    """cols a multiple of 16: every row's codes start on a 16-byte boundary."""
    found = [(3, 16), (5, 32), (7, 1008), (odd(rng, 9, 40), 16 * odd(rng, 10, 300))]
    if gpu:
        found += [(odd(rng, 1000, 3000), 16 * odd(rng, 64, 511)), (odd(rng, 50, 150), 16 * odd(rng, 513, 1023))]
    return found


def _dequant_case(shape, generator, device) -> Case:
    import torch

    rows, cols = shape
    q = torch.randint(-128, 128, (rows, cols), generator=generator, device=device, dtype=torch.int8)
    q[0, 0] = -128  # the code a symmetric quantizer never writes, but a dequantizer must take
    scale = torch.rand(rows, generator=generator, device=device) * 0.05
    if rows > 1:
        scale[1] = math.nan  # a row whose quantization saw inf or NaN: NaN out
    if rows > 2:
        scale[2] = 0.0
    out = Output("y", (rows, cols), "bfloat16", rtol=2**-8, exact_nonfinite=True)
    return Case((q, scale), (out,), note="code -128, a NaN scale, a zero scale")


def _dequant_ref(q, scale):
    import torch

    return ((q.float() * scale[:, None]).to(torch.bfloat16),)


# -- 3. int8_gemm ---------------------------------------------------------------------------------------------------

def _gemm_shapes(rng, gpu: bool) -> list[tuple[int, ...]]:
    found = [(1, 1, 1), (31, 17, 29), (64, 48, 100), (odd(rng, 20, 80), odd(rng, 20, 80), odd(rng, 16, 130))]
    if gpu:
        found += [(odd(rng, 500, 1100), odd(rng, 500, 1100), odd(rng, 500, 1100))]
    return found


def _gemm_case(shape, generator, device) -> Case:
    import torch

    M, N, K = shape
    A = torch.randint(-127, 128, (M, K), generator=generator, device=device, dtype=torch.int8)
    Bt = torch.randint(-127, 128, (N, K), generator=generator, device=device, dtype=torch.int8)
    A[0, 0] = Bt[0, 0] = -127  # products of the extremes: 16129 each
    return Case((A, Bt), (Output("C", (M, N), "int32"),))


def _gemm_ref(A, Bt):
    import torch

    return ((A.double() @ Bt.double().t()).to(torch.int32),)  # exact: |sums| < 2**53


EXERCISES = [
    Exercise(
        name="quantize_rows", chapter="08_int8", title="Per-row absmax quantization, round half to even",
        language="triton", entry="quantize_rows", signature="quantize_rows(x, q, scale)", shapes=_quant_shapes,
        make_case=_quant_case, reference=_quant_ref, bar=Bar((65536, 4096), 0.85, "triton_quant", "float32"),
        nbytes=lambda rows, cols: 5 * rows * cols + 4 * rows, flops=lambda rows, cols: 5 * rows * cols,
    ),
    Exercise(
        name="dequantize_bf16", chapter="08_int8", title="Dequantize to bf16, 16 codes per load", language="cuda",
        entry="dequantize_bf16", signature="dequantize_bf16(q, scale, y)", shapes=_dequant_shapes,
        make_case=_dequant_case, reference=_dequant_ref, bar=Bar((65536, 4096), 0.85, "cuda_dequant", "bfloat16"),
        nbytes=lambda rows, cols: 3 * rows * cols + 4 * rows, flops=lambda rows, cols: rows * cols,
        requires_sass=(("LDG.E.128", "16-byte loads of 16 codes"), ("STG.E.128", "16-byte stores")),
        sanitize_shape=(7, 1008),
    ),
    Exercise(
        name="int8_gemm", chapter="08_int8", title="An int8 GEMM with int32 accumulation", language="triton",
        entry="int8_gemm", signature="int8_gemm(A, Bt, C)", shapes=_gemm_shapes, make_case=_gemm_case,
        reference=_gemm_ref, bar=Bar((4096, 4096, 4096), 0.80, "triton_igemm", "int8"),
        nbytes=lambda M, N, K: M * K + N * K + 4 * M * N, flops=lambda M, N, K: 2 * M * N * K,
    ),
]
