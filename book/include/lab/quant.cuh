// lab/quant.cuh: chapter 08's per-row int8 quantisation, the pieces every quantize rung shares.
//
//   Codes<N>::type                 N int8 codes, loaded or stored at once (4 codes: a word; 8: a uint2)
//   vec_magbits<T>, max_bits<T>,   a row's max |x| on bit patterns (inf and NaN sort above every finite value, so
//   as_f32bits<T>                  one integer max finds the max and whether the row holds inf or NaN)
//   (warp_max(u), block_max(u)     that max over a warp and a block, on unsigned bits: lab/reduce.cuh)
//   row_scale(amax)                the row's scale: amax / 127 (IEEE), NaN for inf or NaN, 0 for an all-zero row
//   vec_codes<T>, code1            a 16-byte vector's codes (or one code), bit-exact to torch's round(x / s)
//   VPT, load_vecs, max_vecs,      up to VPT 16-byte vectors per thread held in registers between the max and
//   store_codes                    the codes
//
// Chapter 08 explains them (section 1, "The CUDA kernels") and only its quantize rungs include it (warp, staged,
// block and cluster per row); its dequantize cell takes Codes from it. The types and 16-byte vectors come from
// lab/vec.cuh (chapter 03).
#pragma once
#include <cuda_fp16.h>
#include <lab/reduce.cuh>  // warp_max, block_max on unsigned bits
#include <lab/vec.cuh>  // to_f, V16<T>::N

#define QNAN __int_as_float(0x7fffffff)  // NVRTC has no math.h
template <int N> struct Codes;                                   // N int8 codes, loaded or stored at once
template <> struct Codes<4> { using type = unsigned int; };     // an fp32 vector's 4 codes: 4 bytes
template <> struct Codes<8> { using type = uint2; };            // a 16-bit vector's 8 codes: 8 bytes

// The row's max |x|, on bit patterns. With the sign bit cleared, unsigned order of IEEE bit patterns is
// the order of magnitudes, and inf and every NaN sort above all finite values: one integer max per
// element finds max |x| and whether the row holds inf or NaN (fmaxf would drop a NaN). Two 16-bit
// values go through one 16x2 max. Reductions run on the fp32 bit pattern of |x|.
template <typename T> __device__ __forceinline__ unsigned vec_magbits(uint4 raw);
template <> __device__ __forceinline__ unsigned vec_magbits<float>(uint4 w) {
    return max(max(w.x & 0x7fffffffu, w.y & 0x7fffffffu), max(w.z & 0x7fffffffu, w.w & 0x7fffffffu));
}
__device__ __forceinline__ unsigned pairs_magbits(uint4 w) {  // two 16-bit maxima, one per half-word
    const unsigned m = 0x7fff7fffu;
    return __vmaxu2(__vmaxu2(w.x & m, w.y & m), __vmaxu2(w.z & m, w.w & m));
}
template <> __device__ __forceinline__ unsigned vec_magbits<__nv_bfloat16>(uint4 w) { return pairs_magbits(w); }
template <> __device__ __forceinline__ unsigned vec_magbits<__half>(uint4 w) { return pairs_magbits(w); }
// Two running maxima in T's bits: one word, or two 16-bit halves (an ordinary max would compare the pairs).
template <typename T> __device__ __forceinline__ unsigned max_bits(unsigned a, unsigned b) { return __vmaxu2(a, b); }
template <> __device__ __forceinline__ unsigned max_bits<float>(unsigned a, unsigned b) { return max(a, b); }
// A thread's running maximum (in T's bits) as the fp32 bit pattern of the same |x|.
template <typename T> __device__ __forceinline__ unsigned as_f32bits(unsigned b);
template <> __device__ __forceinline__ unsigned as_f32bits<float>(unsigned b) { return b; }
template <> __device__ __forceinline__ unsigned as_f32bits<__nv_bfloat16>(unsigned b) {
    return max(b >> 16, b & 0xffffu) << 16;  // bf16 is the top half of an fp32
}
template <> __device__ __forceinline__ unsigned as_f32bits<__half>(unsigned b) {
    const unsigned short h = (unsigned short)max(b >> 16, b & 0xffffu);
    return __float_as_uint(__half2float(__ushort_as_half(h)));  // inf -> inf, NaN -> a NaN
}

// The scale from the row's max |x| (fp32 bits): NaN for a row holding inf or NaN, 0 for an all-zero row.
// __fdiv_rn is IEEE division (as is `/` without -use_fast_math): the same fp32 value torch computes.
__device__ __forceinline__ float row_scale(unsigned amax) {
    return amax >= 0x7f800000u ? QNAN : __fdiv_rn(__uint_as_float(amax), 127.f);
}

// Codes: rint(x / s) clamped to [-127, 127], round half to even, bit-exact to torch's round(x / s), without
// an IEEE division per element. For a normal s, y = x * r with r = 1/s rounded once per row is within
// 3 * 2^-24 * 127 < 2.5e-5 of the exact quotient, and |y| < 127.5 (|x| <= amax, s = amax / 127 rounded), so
// rint(y) is a code in [-127, 127] and differs from rint(x / s) only where y lies within 2.5e-5 of a
// half-integer. A vector with such an element (about 1 in 600 vectors of 8) is redone with exact
// division and a clamp, as is every vector of a row whose scale is subnormal (r may overflow there).
// Rounding: adding 1.5 * 2^23 rounds to an integer, half to even, and leaves it in the low mantissa bits,
// two's complement, so the code is the low byte of the sum's bit pattern.
#define MAGIC 12582912.f
#define FLT_MIN_ __int_as_float(0x00800000)
__device__ __forceinline__ unsigned code_exact(float v, float s) {  // the code in the low byte
    return __float_as_uint(__fadd_rn(fminf(fmaxf(__fdiv_rn(v, s), -127.f), 127.f), MAGIC));
}
__device__ __forceinline__ unsigned pack4(const unsigned* b) {  // the low bytes of four words, in order
    return __byte_perm(__byte_perm(b[0], b[1], 0x0040), __byte_perm(b[2], b[3], 0x0040), 0x5410);
}
// A 16-byte vector as fp32 values: lab/vec.cuh's unpack16, except bf16, which is the top half of an fp32: one shift
// or one mask per value.
template <typename T> __device__ __forceinline__ void unpack(uint4 raw, float* f) { unpack16<T>(raw, f); }
template <> __device__ __forceinline__ void unpack<__nv_bfloat16>(uint4 raw, float* f) {
    const unsigned* w = reinterpret_cast<const unsigned*>(&raw);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        f[2 * k] = __uint_as_float(w[k] << 16);
        f[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
    }
}
template <typename T> __device__ __forceinline__ typename Codes<V16<T>::N>::type vec_codes(uint4 raw, float s, float r) {
    constexpr int N = V16<T>::N;
    typename Codes<N>::type out;
    unsigned* o = reinterpret_cast<unsigned*>(&out);
    if (!(s > 0.f)) {  // all-zero row (s = 0) or poisoned row (s = NaN): codes 0, no division
#pragma unroll
        for (int k = 0; k < N / 4; ++k) o[k] = 0u;
        return out;
    }
    float f[N];
    unpack<T>(raw, f);
    unsigned b[N];
    bool fast = s >= FLT_MIN_;
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const float y = __fmul_rn(f[i], r), sum = __fadd_rn(y, MAGIC);
        b[i] = __float_as_uint(sum);
        fast &= fabsf(y - __fsub_rn(sum, MAGIC)) < 0.4999f;  // false near a half-integer
    }
    if (!fast) {
#pragma unroll
        for (int i = 0; i < N; ++i) b[i] = code_exact(f[i], s);
    }
#pragma unroll
    for (int k = 0; k < N / 4; ++k) o[k] = pack4(b + 4 * k);
    return out;
}
// One code, for the scalar path.
__device__ __forceinline__ signed char code1(float v, float s) {
    return s > 0.f ? (signed char)(code_exact(v, s) & 0xffu) : 0;
}

// Up to VPT 16-byte vectors per thread stay in registers between the max and the codes, all loaded at once.
constexpr int VPT = 8;

template <int V> __device__ __forceinline__ void load_vecs(uint4 (&r)[V], const uint4* pv, int first, int step, int nvec) {
#pragma unroll
    for (int u = 0; u < V; ++u)
        if (first + u * step < nvec) r[u] = pv[first + u * step];
}
template <typename T, int V> __device__ __forceinline__ unsigned max_vecs(const uint4 (&r)[V], int first, int step, int nvec) {
    unsigned m = 0u;
#pragma unroll
    for (int u = 0; u < V; ++u)
        if (first + u * step < nvec) m = max_bits<T>(m, vec_magbits<T>(r[u]));
    return as_f32bits<T>(m);
}
template <typename T, int V> __device__ __forceinline__ void store_codes(const uint4 (&r)[V], typename Codes<V16<T>::N>::type* ov,
                                                                         int first, int step, int nvec, float s) {
    const float inv = __frcp_rn(s);
#pragma unroll
    for (int u = 0; u < V; ++u)
        if (first + u * step < nvec) ov[first + u * step] = vec_codes<T>(r[u], s, inv);
}
