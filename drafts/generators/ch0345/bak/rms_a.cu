#include <cuda_bf16.h>
#define NEG_INF __int_as_float(0xff800000)  // -inf (NVRTC has no math.h)
__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16(v); }

// -- 16-byte vectors with scalar head and tail -------------------------------------------------------
template <typename T> struct V16 { static constexpr int N = 16 / sizeof(T); };  // 4 floats, 8 bf16
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


// -- sums over a warp and a block -------------------------------------------------------------------
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;  // every lane holds the warp's sum
}
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float part[32];
    __shared__ float total;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    if (lane == 0) part[warp] = v;
    __syncthreads();  // all warps' partial sums are in shared memory before warp 0 reads them
    if (warp == 0) {
        float t = warp_sum(lane < nwarps ? part[lane] : 0.f);
        if (lane == 0) total = t;
    }
    __syncthreads();  // the total is written before any thread reads it
    return total;
}

// y = x / sqrt(mean(x^2) + eps) * w. The statistic is one pass (a sum of squares, no max to subtract,
// no mean to center on); the output needs x a second time and w once.

// -- rung 1: one row per block, scalar loads, two passes over global memory --------------------------
template <typename T>
__global__ void rmsnorm_block(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ out,
                              int cols, float eps) {
    const T* p = x + (size_t)blockIdx.x * cols;
    T* q = out + (size_t)blockIdx.x * cols;
    float ss = 0.f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) { const float v = to_f(p[i]); ss += v * v; }
    // rsqrt(inf) = 0: a row holding +-inf gives NaN where x is infinite and 0 elsewhere, as torch does
    const float r = rsqrtf(block_sum(ss) / cols + eps);
    for (int i = threadIdx.x; i < cols; i += blockDim.x) q[i] = from_f<T>(to_f(p[i]) * r * to_f(w[i]));
}

// w at columns [j, j + N): one 16-byte load when x's vector is aligned with w (the row's head is 0),
// else N scalar loads (w is 16-byte aligned at column 0, x's row at column `head`).
template <typename T>
__device__ __forceinline__ void load_w(const T* w, int j, bool aligned, float* f) {
    if (aligned) {
        unpack16<T>(*reinterpret_cast<const uint4*>(w + j), f);
    } else {
#pragma unroll
        for (int k = 0; k < V16<T>::N; ++k) f[k] = to_f(w[j + k]);
    }
}

template <typename T>
__device__ __forceinline__ float row_sumsq_vec(const T* p, int cols, int tid, int lanes) {
    constexpr int N = V16<T>::N;
    const int head = head_len(p, cols), nvec = (cols - head) / N, tail0 = head + nvec * N;
    const uint4* body = reinterpret_cast<const uint4*>(p + head);
    float ss = 0.f;
    if (tid < head) { const float v = to_f(p[tid]); ss += v * v; }
    if (tail0 + tid < cols) { const float v = to_f(p[tail0 + tid]); ss += v * v; }
#pragma unroll 4
    for (int i = tid; i < nvec; i += lanes) {
        float f[N];
        unpack16<T>(body[i], f);
#pragma unroll
        for (int k = 0; k < N; ++k) ss += f[k] * f[k];
    }
    return ss;
}

template <typename T>
__device__ __forceinline__ void row_scale_vec(const T* p, const T* w, T* q, int cols, int tid, int lanes, float r) {
    constexpr int N = V16<T>::N;
    const int head = head_len(p, cols), nvec = (cols - head) / N, tail0 = head + nvec * N;
    const uint4* body = reinterpret_cast<const uint4*>(p + head);
    uint4* obody = reinterpret_cast<uint4*>(q + head);
    if (tid < head) q[tid] = from_f<T>(to_f(p[tid]) * r * to_f(w[tid]));
    if (tail0 + tid < cols) q[tail0 + tid] = from_f<T>(to_f(p[tail0 + tid]) * r * to_f(w[tail0 + tid]));
#pragma unroll 4
    for (int i = tid; i < nvec; i += lanes) {
        float f[N], g[N];
        unpack16<T>(body[i], f);
        load_w(w, head + i * N, head == 0, g);
#pragma unroll
        for (int k = 0; k < N; ++k) f[k] = f[k] * r * g[k];
        obody[i] = pack16<T>(f);
    }
}

// -- rung 2: one row per block, 16-byte loads ---------------------------------------------------------
template <typename T>
__global__ void rmsnorm_vec(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ out,
                            int cols, float eps) {
    const T* p = x + (size_t)blockIdx.x * cols;
    const float r = rsqrtf(block_sum(row_sumsq_vec(p, cols, threadIdx.x, blockDim.x)) / cols + eps);
    row_scale_vec(p, w, out + (size_t)blockIdx.x * cols, cols, threadIdx.x, blockDim.x, r);
}

// -- rung 3: one row per warp: five shuffles, no shared memory, no barrier -------------------------------
template <typename T>
__global__ void rmsnorm_warp(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ out,
                             int rows, int cols, float eps) {
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows) return;  // whole warps leave together
    const T* p = x + (size_t)row * cols;
    const float r = rsqrtf(warp_sum(row_sumsq_vec(p, cols, lane, 32)) / cols + eps);
    row_scale_vec(p, w, out + (size_t)row * cols, cols, lane, 32, r);
}
