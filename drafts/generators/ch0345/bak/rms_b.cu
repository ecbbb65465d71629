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
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

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

// -- rung 4: the row's slice in shared memory, DRAM read once; long rows over a cluster ---------------
// As in chapter 03: pass 1 copies this block's slice of the row into shared memory while it sums the
// squares; the cluster adds its CL partial sums through distributed shared memory; pass 2 reads x from
// shared memory and w (the same for every row, so L2-resident) from global memory.
template <typename T, int CL>
__device__ __forceinline__ void rmsnorm_slice(const T* __restrict__ x, const T* __restrict__ w,
                                              T* __restrict__ out, int cols, float eps) {
    constexpr int N = V16<T>::N;
    extern __shared__ uint4 slice[];
    const int tid = threadIdx.x, rank = (int)(blockIdx.x % CL);
    const size_t row = blockIdx.x / CL;
    const T* p = x + row * cols;
    T* q = out + row * cols;
    const int head = head_len(p, cols), nvec = (cols - head) / N, tail0 = head + nvec * N;
    const int per = (nvec + CL - 1) / CL, v0 = rank * per, v1 = min(nvec, v0 + per);
    const uint4* body = reinterpret_cast<const uint4*>(p + head);

    float ss = 0.f, xh = 0.f, xt = 0.f;
    const bool has_h = rank == 0 && tid < head, has_t = rank == 0 && tail0 + tid < cols;
    if (has_h) { xh = to_f(p[tid]); ss += xh * xh; }
    if (has_t) { xt = to_f(p[tail0 + tid]); ss += xt * xt; }
#pragma unroll 4
    for (int i = v0 + tid; i < v1; i += blockDim.x) {
        const uint4 raw = body[i];
        slice[i - v0] = raw;  // read back below by this same thread: no barrier needed for the slice
        float f[N];
        unpack16<T>(raw, f);
#pragma unroll
        for (int k = 0; k < N; ++k) ss += f[k] * f[k];
    }
    ss = block_sum(ss);
    if constexpr (CL > 1) {
        __shared__ float mine, all;
        cg::cluster_group cluster = cg::this_cluster();
        if (tid == 0) mine = ss;
        cluster.sync();  // every block's partial sum is written before any peer reads it
        if (tid == 0) {
            float t = 0.f;
            for (int k = 0; k < CL; ++k) t += *cluster.map_shared_rank(&mine, k);  // same order in every block
            all = t;
        }
        cluster.sync();  // `all` is visible, and no block exits while a peer still reads its `mine`
        ss = all;
    }
    const float r = rsqrtf(ss / cols + eps);

    if (has_h) q[tid] = from_f<T>(xh * r * to_f(w[tid]));
    if (has_t) q[tail0 + tid] = from_f<T>(xt * r * to_f(w[tail0 + tid]));
    uint4* obody = reinterpret_cast<uint4*>(q + head);
#pragma unroll 4
    for (int i = v0 + tid; i < v1; i += blockDim.x) {
        float f[N], g[N];
        unpack16<T>(slice[i - v0], f);
        load_w(w, head + i * N, head == 0, g);
#pragma unroll
        for (int k = 0; k < N; ++k) f[k] = f[k] * r * g[k];
        obody[i] = pack16<T>(f);
    }
}

template <typename T>
__global__ void rmsnorm_smem(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ out, int cols, float eps) {
    rmsnorm_slice<T, 1>(x, w, out, cols, eps);
}
template <typename T, int CL> __global__ void __cluster_dims__(CL, 1, 1)
rmsnorm_cluster(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ out, int cols, float eps) {
    rmsnorm_slice<T, CL>(x, w, out, cols, eps);
}
