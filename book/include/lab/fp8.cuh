// lab/fp8.cuh: chapter 10's FP8 quantisation: a group's scale from its max |x|, and e4m3 codes by Hopper's cvt.
//
//   E4M3_MAX, AMAX_FLOOR             448 (e4m3's largest finite value); 1e-4, the least max |x| a scale is taken
//                                    from (an all-zero group gets codes 0 and a scale of 1e-4 / 448)
//   fp8_scale(amax_bits, s, inv)     s = max(amax, 1e-4) / 448 and inv = 448 / max(amax, 1e-4), both IEEE (the
//                                    reference computes the same two fp32 numbers); NaN and NaN for a group
//                                    holding inf or NaN, so its codes are NaN and its dequantised values too
//   e4m3x8<T>(raw, inv)              a 16-byte vector of bf16 (8 values) times inv as 8 e4m3 codes in a uint2:
//                                    cvt.rn.satfinite.e4m3x2.f32 through cuda_fp8.h, round to nearest even,
//                                    finite values past 448 saturate to 448, NaN stays NaN (0x7f)
//   lanes_max<W>(u)                  a max over W neighbouring lanes (16: a 128-element group of bf16, 8 a lane)
//
// Chapter 10 explains them (section 2, "The CUDA kernels"); its quantize rungs include it. A group's max |x| is
// chapter 08's, on bit patterns (vec_magbits, as_f32bits, load_vecs, max_vecs from lab/quant.cuh), whose unpack
// turns a bf16 vector into fp32 values.
#pragma once
#include <cuda_fp8.h>
#include <lab/quant.cuh>  // vec_magbits, as_f32bits, unpack, load_vecs, max_vecs, VPT (chapter 08)

#define E4M3_MAX 448.f
#define AMAX_FLOOR 1e-4f

__device__ __forceinline__ void fp8_scale(unsigned amax_bits, float& s, float& inv) {
    if (amax_bits >= 0x7f800000u) {  // inf or NaN in the group: both NaN
        s = inv = QNAN;
        return;
    }
    const float a = fmaxf(__uint_as_float(amax_bits), AMAX_FLOOR);
    s = __fdiv_rn(a, E4M3_MAX);
    inv = __fdiv_rn(E4M3_MAX, a);
}

template <typename T> __device__ __forceinline__ uint2 e4m3x8(uint4 raw, float inv) {
    static_assert(V16<T>::N == 8, "e4m3x8 takes a vector of 8 16-bit values");
    float f[8];
    unpack<T>(raw, f);
    unsigned short h[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)  // .x goes to the low byte
        h[k] = __nv_cvt_float2_to_fp8x2(make_float2(__fmul_rn(f[2 * k], inv), __fmul_rn(f[2 * k + 1], inv)),
                                        __NV_SATFINITE, __NV_E4M3);
    return make_uint2(h[0] | (unsigned)h[1] << 16, h[2] | (unsigned)h[3] << 16);
}

template <int W> __device__ __forceinline__ unsigned lanes_max(unsigned u) {
#pragma unroll
    for (int o = W / 2; o > 0; o >>= 1) u = max(u, __shfl_xor_sync(0xffffffffu, u, o));
    return u;
}
