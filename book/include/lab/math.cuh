// lab/math.cuh: the few math pieces NVRTC has no header for, as the row kernels use them.
//
//   NEG_INF          -inf (NVRTC has no math.h)
//   ex2(v), L2E      2^v in one MUFU.EX2; e^x = 2^(x * L2E)
//   fmax_nan(a, b)   the max, or NaN if either is NaN (fmaxf drops a NaN)
//
// Chapter 03 explains them (rung 6, `softmax_bulk`: one EX2 an element, and a max that keeps NaN). Chapters 04 and
// 05 include it; 03 still defines them in its cells, and chapter 07 calls its ex2 `fast_exp2`.
#pragma once

#define NEG_INF __int_as_float(0xff800000)  // -inf (NVRTC has no math.h)

// 2^v in one MUFU.EX2 (flush-to-zero: a result below 2^-126 is 0 to any tolerance the book uses)
__device__ __forceinline__ float ex2(float v) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
}
constexpr float L2E = 1.4426950408889634f;  // log2(e): e^(y - m) = 2^(y * L2E - m * L2E), one FFMA and one EX2

__device__ __forceinline__ float fmax_nan(float a, float b) {  // the max, or NaN if either is NaN
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
