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

// w at columns [j, j + N): one 16-byte load when aligned with x's vector (the row's head is 0), else N scalars.
template <typename T>
__device__ __forceinline__ void load_w(const T* w, int j, bool aligned, float* f) {
    if (aligned) {
        unpack16<T>(*reinterpret_cast<const uint4*>(w + j), f);
    } else {
#pragma unroll
        for (int k = 0; k < V16<T>::N; ++k) f[k] = to_f(w[j + k]);
    }
}


// softmax(RMSNorm(x)) per row: r = rsqrt(mean(x^2) + eps), y = x * r * w, out = softmax(y). The max and
// sum of the softmax are over y, which needs r, which needs the whole row: the row is looked at three
// times (sum of squares; online (m, d) of y; write), and the question is only where from.

// -- rung 1: one row per block, three passes over global memory (the re-reads served by L2, we hope) ---
template <typename T>
__global__ void fused_three_pass(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ out,
                                 int cols, float eps) {
    constexpr int N = V16<T>::N;
    const T* p = x + (size_t)blockIdx.x * cols;
    T* q = out + (size_t)blockIdx.x * cols;
    const int tid = threadIdx.x, lanes = blockDim.x;
    const int head = head_len(p, cols), nvec = (cols - head) / N, tail0 = head + nvec * N;
    const uint4* body = reinterpret_cast<const uint4*>(p + head);
    const bool has_h = tid < head, has_t = tail0 + tid < cols;

    float ss = 0.f;  // pass 1: sum of squares
    if (has_h) { const float v = to_f(p[tid]); ss += v * v; }
    if (has_t) { const float v = to_f(p[tail0 + tid]); ss += v * v; }
#pragma unroll 4
    for (int i = tid; i < nvec; i += lanes) {
        float f[N];
        unpack16<T>(body[i], f);
#pragma unroll
        for (int k = 0; k < N; ++k) ss += f[k] * f[k];
    }
    const float r = rsqrtf(block_sum(ss) / cols + eps);

    MD s = {NEG_INF, 0.f};  // pass 2: (m, d) of y = x * r * w
    if (has_h) { float y = to_f(p[tid]) * r * to_f(w[tid]); md_add<1>(s, &y); }
    if (has_t) { float y = to_f(p[tail0 + tid]) * r * to_f(w[tail0 + tid]); md_add<1>(s, &y); }
#pragma unroll 4
    for (int i = tid; i < nvec; i += lanes) {
        float f[N], g[N];
        unpack16<T>(body[i], f);
        load_w(w, head + i * N, head == 0, g);
#pragma unroll
        for (int k = 0; k < N; ++k) f[k] = f[k] * r * g[k];
        md_add<N>(s, f);
    }
    s = block_merge(s);
    const float inv = 1.f / s.d;

    if (has_h) q[tid] = from_f<T>(rescale(to_f(p[tid]) * r * to_f(w[tid]), s.m) * inv);  // pass 3
    if (has_t) q[tail0 + tid] = from_f<T>(rescale(to_f(p[tail0 + tid]) * r * to_f(w[tail0 + tid]), s.m) * inv);
    uint4* obody = reinterpret_cast<uint4*>(q + head);
#pragma unroll 4
    for (int i = tid; i < nvec; i += lanes) {
        float f[N], g[N];
        unpack16<T>(body[i], f);
        load_w(w, head + i * N, head == 0, g);
#pragma unroll
        for (int k = 0; k < N; ++k) f[k] = rescale(f[k] * r * g[k], s.m) * inv;
        obody[i] = pack16<T>(f);
    }
}

// -- rung 3 (short rows): one row per warp, the row in registers ---------------------------------------
// Each lane keeps up to VPT 16-byte vectors of the row in registers (VPT * N floats), so x is read once
// and w once; rows longer than 32 * VPT * N elements are the shared-memory kernel's job (the launcher
// dispatches). Fully unrolled loops over k < VPT keep the array in registers (a dynamic index would
// put it in local memory: the resource report's stack column would show it).
template <typename T, int VPT>
__global__ void fused_warp(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ out,
                           int rows, int cols, float eps) {
    constexpr int N = V16<T>::N;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows) return;  // whole warps leave together
    const T* p = x + (size_t)row * cols;
    T* q = out + (size_t)row * cols;
    const int head = head_len(p, cols), nvec = (cols - head) / N, tail0 = head + nvec * N;
    const uint4* body = reinterpret_cast<const uint4*>(p + head);
    const bool has_h = lane < head, has_t = tail0 + lane < cols;

    float v[VPT][N], xh = 0.f, xt = 0.f, ss = 0.f;
    if (has_h) { xh = to_f(p[lane]); ss += xh * xh; }
    if (has_t) { xt = to_f(p[tail0 + lane]); ss += xt * xt; }
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int i = lane + 32 * k;
        if (i < nvec) {
            unpack16<T>(body[i], v[k]);
#pragma unroll
            for (int e = 0; e < N; ++e) ss += v[k][e] * v[k][e];
        }
    }
    const float r = rsqrtf(warp_sum(ss) / cols + eps);

    MD s = {NEG_INF, 0.f};
    if (has_h) { xh *= r * to_f(w[lane]); md_add<1>(s, &xh); }
    if (has_t) { xt *= r * to_f(w[tail0 + lane]); md_add<1>(s, &xt); }
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int i = lane + 32 * k;
        if (i < nvec) {
            float g[N];
            load_w(w, head + i * N, head == 0, g);
#pragma unroll
            for (int e = 0; e < N; ++e) v[k][e] *= r * g[e];
            md_add<N>(s, v[k]);
        }
    }
    s = warp_merge(s);
    const float inv = 1.f / s.d;

    if (has_h) q[lane] = from_f<T>(rescale(xh, s.m) * inv);
    if (has_t) q[tail0 + lane] = from_f<T>(rescale(xt, s.m) * inv);
    uint4* obody = reinterpret_cast<uint4*>(q + head);
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int i = lane + 32 * k;
        if (i < nvec) {
#pragma unroll
            for (int e = 0; e < N; ++e) v[k][e] = rescale(v[k][e], s.m) * inv;
            obody[i] = pack16<T>(v[k]);
        }
    }
}
