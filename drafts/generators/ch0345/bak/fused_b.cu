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

#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// -- rung 2: the row's slice in shared memory (as fp32), long rows over a cluster ----------------------
// Pass 1 stages the slice in shared memory as fp32 while summing squares; pass 2 overwrites it in place
// with y = x * r * w (reading w once) while folding (m, d); pass 3 writes softmax(y) from it. DRAM:
// x read once, out written once, w (shared by all rows) from L2. Staging fp32 rather than bf16 costs
// twice the shared memory in bf16 and saves re-reading w and recomputing y in pass 3.
template <int CL>
__device__ __forceinline__ float cluster_sum(float v) {
    if constexpr (CL == 1) {
        return v;
    } else {
        __shared__ float mine, all;
        cg::cluster_group cluster = cg::this_cluster();
        if (threadIdx.x == 0) mine = v;
        cluster.sync();  // every block's partial is written before any peer reads it
        if (threadIdx.x == 0) {
            float t = 0.f;
            for (int k = 0; k < CL; ++k) t += *cluster.map_shared_rank(&mine, k);  // same order in every block
            all = t;
        }
        cluster.sync();  // `all` is visible, and `mine` is not overwritten or freed while a peer reads it
        return all;
    }
}
template <int CL>
__device__ __forceinline__ MD cluster_merge(MD s) {
    if constexpr (CL == 1) {
        return s;
    } else {
        __shared__ MD mine, all;
        cg::cluster_group cluster = cg::this_cluster();
        if (threadIdx.x == 0) mine = s;
        cluster.sync();
        if (threadIdx.x == 0) {
            MD t = {NEG_INF, 0.f};
            for (int k = 0; k < CL; ++k) t = md_merge(t, *cluster.map_shared_rank(&mine, k));
            all = t;
        }
        cluster.sync();
        return all;
    }
}

template <typename T, int CL>
__device__ __forceinline__ void fused_slice(const T* __restrict__ x, const T* __restrict__ w,
                                            T* __restrict__ out, int cols, float eps) {
    constexpr int N = V16<T>::N;
    extern __shared__ float4 slice4[];
    const int tid = threadIdx.x, rank = (int)(blockIdx.x % CL);
    const size_t row = blockIdx.x / CL;
    const T* p = x + row * cols;
    T* q = out + row * cols;
    const int head = head_len(p, cols), nvec = (cols - head) / N, tail0 = head + nvec * N;
    const int per = (nvec + CL - 1) / CL, v0 = rank * per, v1 = min(nvec, v0 + per);
    const uint4* body = reinterpret_cast<const uint4*>(p + head);
    const bool has_h = rank == 0 && tid < head, has_t = rank == 0 && tail0 + tid < cols;

    float ss = 0.f, xh = 0.f, xt = 0.f;  // pass 1: stage and sum squares
    if (has_h) { xh = to_f(p[tid]); ss += xh * xh; }
    if (has_t) { xt = to_f(p[tail0 + tid]); ss += xt * xt; }
#pragma unroll 4
    for (int i = v0 + tid; i < v1; i += blockDim.x) {
        float f[N];
        unpack16<T>(body[i], f);
        float4* dst = slice4 + (size_t)(i - v0) * (N / 4);  // each thread re-reads only its own vectors:
#pragma unroll                                              // no barrier is needed for the slice
        for (int k = 0; k < N / 4; ++k) dst[k] = make_float4(f[4 * k], f[4 * k + 1], f[4 * k + 2], f[4 * k + 3]);
#pragma unroll
        for (int k = 0; k < N; ++k) ss += f[k] * f[k];
    }
    const float r = rsqrtf(cluster_sum<CL>(block_sum(ss)) / cols + eps);

    MD s = {NEG_INF, 0.f};  // pass 2: y = x * r * w, in place, and its (m, d)
    if (has_h) { xh *= r * to_f(w[tid]); md_add<1>(s, &xh); }
    if (has_t) { xt *= r * to_f(w[tail0 + tid]); md_add<1>(s, &xt); }
#pragma unroll 4
    for (int i = v0 + tid; i < v1; i += blockDim.x) {
        float f[N], g[N];
        float4* at = slice4 + (size_t)(i - v0) * (N / 4);
        load_w(w, head + i * N, head == 0, g);
#pragma unroll
        for (int k = 0; k < N / 4; ++k) {  // 16-byte shared-memory accesses: no bank conflicts within a quarter warp
            float4 v = at[k];
            v = make_float4(v.x * r * g[4 * k], v.y * r * g[4 * k + 1], v.z * r * g[4 * k + 2], v.w * r * g[4 * k + 3]);
            at[k] = v;
            f[4 * k] = v.x; f[4 * k + 1] = v.y; f[4 * k + 2] = v.z; f[4 * k + 3] = v.w;
        }
        md_add<N>(s, f);
    }
    s = cluster_merge<CL>(block_merge(s));
    const float inv = 1.f / s.d;

    if (has_h) q[tid] = from_f<T>(rescale(xh, s.m) * inv);  // pass 3: write from shared memory
    if (has_t) q[tail0 + tid] = from_f<T>(rescale(xt, s.m) * inv);
    uint4* obody = reinterpret_cast<uint4*>(q + head);
#pragma unroll 4
    for (int i = v0 + tid; i < v1; i += blockDim.x) {
        float f[N];
        const float4* at = slice4 + (size_t)(i - v0) * (N / 4);
#pragma unroll
        for (int k = 0; k < N / 4; ++k) {
            const float4 v = at[k];
            f[4 * k] = rescale(v.x, s.m) * inv; f[4 * k + 1] = rescale(v.y, s.m) * inv;
            f[4 * k + 2] = rescale(v.z, s.m) * inv; f[4 * k + 3] = rescale(v.w, s.m) * inv;
        }
        obody[i] = pack16<T>(f);
    }
}

template <typename T>
__global__ void fused_smem(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ out, int cols, float eps) {
    fused_slice<T, 1>(x, w, out, cols, eps);
}
template <typename T, int CL> __global__ void __cluster_dims__(CL, 1, 1)
fused_cluster(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ out, int cols, float eps) {
    fused_slice<T, CL>(x, w, out, cols, eps);
}
