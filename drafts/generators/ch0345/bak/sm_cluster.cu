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

#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// -- rung 5: the row staged in shared memory, read from DRAM exactly once ----------------------------
// The two passes of rungs 2-4 read the row twice from global memory and trust L2 to serve the second
// read. Here each block copies its slice of the row into shared memory during pass 1 and pass 2 reads
// it from there: DRAM traffic is one read and one write whatever the row length. A row too long for one
// block's shared memory (above 64 KB here) is split over a cluster of CL blocks on CL SMs; each block
// reduces its slice to one (m, d), and the cluster merges the CL states through distributed shared
// memory (one 8-byte remote read per block and peer) instead of a round trip through global memory.
template <typename T, int CL>
__device__ __forceinline__ void softmax_slice(const T* __restrict__ x, T* __restrict__ out, int cols) {
    constexpr int N = V16<T>::N;
    extern __shared__ uint4 slice[];  // this block's share of the row, raw 16-byte vectors
    const int tid = threadIdx.x;
    const int rank = (int)(blockIdx.x % CL);
    const size_t row = blockIdx.x / CL;
    const T* p = x + row * cols;
    T* q = out + row * cols;
    const int head = head_len(p, cols), nvec = (cols - head) / N, tail0 = head + nvec * N;
    const int per = (nvec + CL - 1) / CL, v0 = rank * per, v1 = min(nvec, v0 + per);
    const uint4* body = reinterpret_cast<const uint4*>(p + head);

    // Block rank 0 keeps the scalar head and tail (< N each) in registers.
    MD s = {NEG_INF, 0.f};
    float xh = 0.f, xt = 0.f;
    const bool has_h = rank == 0 && tid < head, has_t = rank == 0 && tail0 + tid < cols;
    if (has_h) { xh = to_f(p[tid]); md_add<1>(s, &xh); }
    if (has_t) { xt = to_f(p[tail0 + tid]); md_add<1>(s, &xt); }
#pragma unroll 4
    for (int i = v0 + tid; i < v1; i += blockDim.x) {
        const uint4 raw = body[i];
        slice[i - v0] = raw;  // read back below by this same thread: no barrier needed for the slice
        float f[N];
        unpack16<T>(raw, f);
        md_add<N>(s, f);
    }
    s = block_merge(s);

    if constexpr (CL > 1) {
        __shared__ MD mine, all;
        cg::cluster_group cluster = cg::this_cluster();
        if (tid == 0) mine = s;
        cluster.sync();  // every block's (m, d) is written before any peer reads it
        if (tid == 0) {
            MD t = {NEG_INF, 0.f};
            for (int r = 0; r < CL; ++r) t = md_merge(t, *cluster.map_shared_rank(&mine, r));  // same order in every block
            all = t;
        }
        cluster.sync();  // `all` is visible to the block, and no block exits while a peer still reads its `mine`
        s = all;
    }

    const float inv = 1.f / s.d;
    if (has_h) q[tid] = from_f<T>(rescale(xh, s.m) * inv);
    if (has_t) q[tail0 + tid] = from_f<T>(rescale(xt, s.m) * inv);
    uint4* obody = reinterpret_cast<uint4*>(q + head);
#pragma unroll 4
    for (int i = v0 + tid; i < v1; i += blockDim.x) {
        float f[N];
        unpack16<T>(slice[i - v0], f);
#pragma unroll
        for (int k = 0; k < N; ++k) f[k] = rescale(f[k], s.m) * inv;
        obody[i] = pack16<T>(f);
    }
}

// One block per row (CL = 1), and clusters of 2, 4 and 8 blocks per row (8 is the portable maximum).
template <typename T> __global__ void softmax_smem(const T* __restrict__ x, T* __restrict__ out, int cols) {
    softmax_slice<T, 1>(x, out, cols);
}
template <typename T, int CL> __global__ void __cluster_dims__(CL, 1, 1)
softmax_cluster(const T* __restrict__ x, T* __restrict__ out, int cols) {
    softmax_slice<T, CL>(x, out, cols);
}
