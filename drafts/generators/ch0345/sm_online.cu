#include <cuda_bf16.h>
#define NEG_INF __int_as_float(0xff800000)  // -inf (NVRTC has no math.h)
__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16(v); }

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

// -- rung 2: two passes, scalar loads ----------------------------------------------------------------
// Pass 1 reads the row once for (m, d); pass 2 reads it again and writes. 2 reads + 1 write per element.
template <typename T>
__global__ void softmax_online(const T* __restrict__ x, T* __restrict__ out, int cols) {
    const T* p = x + (size_t)blockIdx.x * cols;
    T* q = out + (size_t)blockIdx.x * cols;
    MD s = {NEG_INF, 0.f};
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        float v = to_f(p[i]);
        md_add<1>(s, &v);
    }
    s = block_merge(s);
    const float inv = 1.f / s.d;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) q[i] = from_f<T>(rescale(to_f(p[i]), s.m) * inv);
}

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

// One row per group of `lanes` threads (the block, or one warp): pass 1 for (m, d), not yet merged.
template <typename T>
__device__ __forceinline__ MD row_stats_vec(const T* p, int cols, int tid, int lanes) {
    constexpr int N = V16<T>::N;
    const int head = head_len(p, cols), nvec = (cols - head) / N, tail0 = head + nvec * N;
    const uint4* body = reinterpret_cast<const uint4*>(p + head);
    MD s = {NEG_INF, 0.f};
    if (tid < head) { float v = to_f(p[tid]); md_add<1>(s, &v); }
    if (tail0 + tid < cols) { float v = to_f(p[tail0 + tid]); md_add<1>(s, &v); }
    batched(tid, nvec, lanes, [&](int i) { return body[i]; }, [&](int, uint4 raw) {
        float f[N];
        unpack16<T>(raw, f);
        md_add<N>(s, f);
    });
    return s;
}

template <typename T>
__device__ __forceinline__ void row_write_vec(const T* p, T* q, int cols, int tid, int lanes, MD s) {
    constexpr int N = V16<T>::N;
    const int head = head_len(p, cols), nvec = (cols - head) / N, tail0 = head + nvec * N;
    const uint4* body = reinterpret_cast<const uint4*>(p + head);
    uint4* obody = reinterpret_cast<uint4*>(q + head);  // out has the same alignment as x (both 16-byte aligned bases)
    const float inv = 1.f / s.d;
    if (tid < head) q[tid] = from_f<T>(rescale(to_f(p[tid]), s.m) * inv);
    if (tail0 + tid < cols) q[tail0 + tid] = from_f<T>(rescale(to_f(p[tail0 + tid]), s.m) * inv);
    batched(tid, nvec, lanes, [&](int i) { return body[i]; }, [&](int i, uint4 raw) {
        float f[N];
        unpack16<T>(raw, f);
#pragma unroll
        for (int k = 0; k < N; ++k) f[k] = rescale(f[k], s.m) * inv;
        obody[i] = pack16<T>(f);
    });
}

// -- rung 3: one row per block, 16-byte loads --------------------------------------------------------
template <typename T>
__global__ void softmax_vec(const T* __restrict__ x, T* __restrict__ out, int cols) {
    const T* p = x + (size_t)blockIdx.x * cols;
    MD s = block_merge(row_stats_vec(p, cols, threadIdx.x, blockDim.x));
    row_write_vec(p, out + (size_t)blockIdx.x * cols, cols, threadIdx.x, blockDim.x, s);
}

// -- rung 4: one row per warp ------------------------------------------------------------------------
// No shared memory and no barrier: the warp's shuffles are the whole reduction. Short rows want this
// (a block per 1024-element row would be 4 KB of work behind two barriers); long rows do not (one
// warp cannot keep enough bytes in flight, and there are too few rows to fill the GPU with warps).
template <typename T>
__global__ void softmax_warp(const T* __restrict__ x, T* __restrict__ out, int rows, int cols) {
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows) return;  // whole warps leave together: the shuffles below stay full-warp
    const T* p = x + (size_t)row * cols;
    MD s = warp_merge(row_stats_vec(p, cols, lane, 32));
    row_write_vec(p, out + (size_t)row * cols, cols, lane, 32, s);
}
