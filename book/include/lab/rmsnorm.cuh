// lab/rmsnorm.cuh: RMSNorm's pieces over a row in global memory: its weights beside x's vectors, its two passes.
//
//   load_w(w, j, aligned, f)       N weights of columns [j, j + N) as fp32: one 16-byte load when x's vector there
//   raw_w(w, j, aligned)           is aligned with w (the row's head is 0), else N scalar loads; raw_w keeps them
//                                  raw (a 16-byte vector in the storage type)
//   XW<T>                          a 16-byte vector of x and the N weights of the same columns: one batch item
//   row_sumsq_vec(p, cols, ..)     pass 1: this thread's share of a row's sum of squares
//   row_scale_vec(p, w, q, ..)     pass 2: y = x * r * w for this thread's share of the row
//
// The passes take a row with `lanes` threads (a block, or one warp), 16-byte vectors with a scalar head and tail,
// in batches (lab/vec.cuh). Chapter 04 explains them (rungs 2 and 3); chapters 04 and 05 include it.
#pragma once
#include <lab/vec.cuh>

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

// N weights from columns [j, j + N) as one raw 16-byte vector: one load when aligned with x's vectors (the
// row's head is 0), else N scalar loads.
template <typename T> __device__ __forceinline__ uint4 raw_w(const T* w, int j, bool aligned) {
    if (aligned) return *reinterpret_cast<const uint4*>(w + j);
    uint4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int k = 0; k < V16<T>::N; ++k) e[k] = w[j + k];
    return raw;
}

// A 16-byte vector of x and the N weights of the same columns, loaded together (one batch item).
template <typename T> struct XW {
    uint4 x;
    float g[V16<T>::N];
    XW() = default;
    __device__ __forceinline__ XW(uint4 raw, const T* w, int j, bool aligned) : x(raw) { load_w(w, j, aligned, g); }
};

// Pass 1 of a row p[0, cols) by `lanes` threads, this one `tid`: its share of the sum of squares.
template <typename T>
__device__ __forceinline__ float row_sumsq_vec(const T* p, int cols, int tid, int lanes) {
    constexpr int N = V16<T>::N;
    const int head = head_len(p, cols), nvec = (cols - head) / N, tail0 = head + nvec * N;
    const uint4* body = reinterpret_cast<const uint4*>(p + head);
    float ss = 0.f;
    if (tid < head) { const float v = to_f(p[tid]); ss += v * v; }
    if (tail0 + tid < cols) { const float v = to_f(p[tail0 + tid]); ss += v * v; }
    batched(tid, nvec, lanes, [&](int i) { return body[i]; }, [&](int, uint4 raw) {
        float f[N];
        unpack16<T>(raw, f);
#pragma unroll
        for (int k = 0; k < N; ++k) ss += f[k] * f[k];
    });
    return ss;
}

// Pass 2: q = p * r * w over this thread's share (out has the same alignment as x: both 16-byte aligned bases).
template <typename T>
__device__ __forceinline__ void row_scale_vec(const T* p, const T* w, T* q, int cols, int tid, int lanes, float r) {
    constexpr int N = V16<T>::N;
    const int head = head_len(p, cols), nvec = (cols - head) / N, tail0 = head + nvec * N;
    const uint4* body = reinterpret_cast<const uint4*>(p + head);
    uint4* obody = reinterpret_cast<uint4*>(q + head);
    if (tid < head) q[tid] = from_f<T>(to_f(p[tid]) * r * to_f(w[tid]));
    if (tail0 + tid < cols) q[tail0 + tid] = from_f<T>(to_f(p[tail0 + tid]) * r * to_f(w[tail0 + tid]));
    batched(tid, nvec, lanes, [&](int i) { return XW<T>(body[i], w, head + i * N, head == 0); }, [&](int i, const XW<T>& v) {
        float f[N];
        unpack16<T>(v.x, f);
#pragma unroll
        for (int k = 0; k < N; ++k) f[k] = f[k] * r * v.g[k];
        obody[i] = pack16<T>(f);
    });
}
