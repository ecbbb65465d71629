// lab/vec.cuh: element types and 16-byte vectors, for kernels that stream rows of fp32 or bf16.
//
//   to_f(v), from_f<T>(f)        the storage type (float, __nv_bfloat16) to fp32 and back; to_f also takes __half
//   V16<T>::N                    elements in a 16-byte vector: 4 floats, 8 bf16 or fp16
//   unpack16<T>, pack16<T>       one 16-byte vector as N fp32 values, and back
//   head_len(p, cols)            the scalar head of a row before its first 16-byte boundary
//   batched(first, end, ...)     BATCH 16-byte loads in flight per thread before any is used
//
// Chapter 03 explains them (rung 3, `softmax_vec`: 16-byte vectors with a scalar head and tail, and why a batch of
// loads); chapters 04, 05 and 08 include it (03 still defines the same helpers in its cells).
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }  // chapter 08 quantizes fp16 too
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16(v); }

// -- 16-byte vectors with scalar head and tail -------------------------------------------------------
template <typename T> struct V16 { static constexpr int N = 16 / sizeof(T); };  // 4 floats, 8 bf16 or fp16
template <typename T> __device__ __forceinline__ void unpack16(uint4 raw, float* f) {
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < V16<T>::N; ++i) f[i] = to_f(e[i]);
}
template <typename T> __device__ __forceinline__ uint4 pack16(const float* f) {
    uint4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int i = 0; i < V16<T>::N; ++i) e[i] = from_f<T>(f[i]);
    return raw;
}
// A row starts at row * cols elements: unless cols is a multiple of N it is not 16-byte aligned, so
// the first `head` (< N) elements go scalar, then whole vectors, then a scalar tail (< N).
template <typename T> __device__ __forceinline__ int head_len(const T* p, int cols) {
    int h = (int)(((16 - (reinterpret_cast<unsigned long long>(p) & 15)) & 15) / sizeof(T));
    return min(h, cols);
}

// Visit vectors i = first, first + stride, ... < end in batches of B: all B loads of a batch are
// issued before any is used. A plain loop lets the compiler keep one 16-byte load in flight per thread
// (it will not hoist a load above the previous iteration's stores); a batch keeps B of them, B x 16
// bytes per thread, which is what it takes to cover DRAM latency at full bandwidth.
constexpr int BATCH = 4;
template <typename Load, typename Use>
__device__ __forceinline__ void batched(int first, int end, int stride, Load load, Use use) {
    for (int i0 = first; i0 < end; i0 += BATCH * stride) {
        decltype(load(0)) r[BATCH];
#pragma unroll
        for (int u = 0; u < BATCH; ++u)
            if (i0 + u * stride < end) r[u] = load(i0 + u * stride);
#pragma unroll
        for (int u = 0; u < BATCH; ++u)
            if (i0 + u * stride < end) use(i0 + u * stride, r[u]);
    }
}
