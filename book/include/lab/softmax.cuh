// lab/softmax.cuh: the online softmax state (m, d) and its merge rule, over a thread, a warp and a block.
//
//   MD, rescale(a, M)                the state: the max so far and d = sum(exp(x_i - m)); exp(a - M) with -inf -> 0
//   md_merge(a, b), md_add<K>(s, v)  merge two states; fold K values with one rescale of the running sum
//   warp_merge, block_merge          over the warp (5 shuffles), over the block (2 barriers)
//
// Chapter 03 explains them (the online merge rule, rungs 2-4, which still define them in its cells); chapter 05
// includes it.
#pragma once
#include <lab/math.cuh>

// -- the online softmax state and its merge rule ----------------------------------------------------
// (m, d): the max so far and d = sum(exp(x_i - m)) over the elements seen. Two states merge as
//   M = max(m_a, m_b),  d = d_a * exp(m_a - M) + d_b * exp(m_b - M)
// which is exact in real arithmetic, associative and commutative: threads, warps and blocks can each
// fold their share in any order.
struct MD { float m, d; };

// exp(a - M), with exp(-inf - anything) = 0. Without the guard an empty state (m = -inf, d = 0) meeting
// another empty one computes 0 * exp(-inf + inf) = 0 * NaN = NaN, and a row whose first elements are
// masked would come out NaN. A fully masked row still gives NaN at the end (0 / 0), as torch does.
__device__ __forceinline__ float rescale(float a, float M) { return a == NEG_INF ? 0.f : __expf(a - M); }

__device__ __forceinline__ MD md_merge(MD a, MD b) {
    const float M = fmaxf(a.m, b.m);
    return {M, a.d * rescale(a.m, M) + b.d * rescale(b.m, M)};
}

// Fold k values with one rescale of the running sum: k + 1 exponentials for k elements, not 2k.
template <int K> __device__ __forceinline__ void md_add(MD& s, const float* v) {
    float mx = v[0];
#pragma unroll
    for (int i = 1; i < K; ++i) mx = fmaxf(mx, v[i]);
    const float M = fmaxf(s.m, mx);
    float d = s.d * rescale(s.m, M);
#pragma unroll
    for (int i = 0; i < K; ++i) d += rescale(v[i], M);  // a NaN input makes d NaN: the row is NaN, as in torch
    s = {M, d};
}

// Butterfly over the warp: after 5 shuffles every lane holds the merge of all 32 states.
__device__ __forceinline__ MD warp_merge(MD s) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        MD o = {__shfl_xor_sync(0xffffffffu, s.m, off), __shfl_xor_sync(0xffffffffu, s.d, off)};
        s = md_merge(s, o);
    }
    return s;
}

// Warps merge with shuffles, then warp 0 merges the per-warp states: 2 barriers per block reduction.
__device__ __forceinline__ MD block_merge(MD s) {
    __shared__ MD part[32];
    __shared__ MD total;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
    s = warp_merge(s);
    if (lane == 0) part[warp] = s;
    __syncthreads();  // all warps' partials are in shared memory before warp 0 reads them
    if (warp == 0) {
        MD t = lane < nwarps ? part[lane] : MD{NEG_INF, 0.f};
        t = warp_merge(t);
        if (lane == 0) total = t;
    }
    __syncthreads();  // the total is written before any thread reads it
    return total;
}
