// lab/reduce.cuh: reductions over a warp, a block, a group of warps and a thread-block cluster.
//
//   warp_sum(v), block_sum(v)          a float's sum over the warp (5 shuffles) / the block (2 barriers)
//   warp_max(v), block_max(v)          its max (fmaxf: a NaN is dropped); on unsigned bits, one redux a warp
//   shfl_xor, warp_all(v, op)          any associative op over the warp, for float and float2 (more: overload
//                                      shfl_xor)
//   group_sync, group_all(v, op, ...)  over a group of warps: one named barrier, two buffers alternated by `phase`
//   push8, cluster_all<CL>(v, op, ..)  over the cluster by pushing: each block writes its value into every peer's
//                                      inbox with st.async, which completes on the peer's mbarrier
//   push_all, take_all                 cluster_all in two halves, so that work runs while the values travel
//
// Chapter 04 explains the warp and block sums (rung 1), chapter 05 the maxima (rung 4), and chapter 03 the rest:
// warp_all, group_all and the pushed exchange (rung 6, `softmax_bulk`), its two halves (rung 8, `softmax_pipe`).
// Chapters 04 and 05 include it; 03 still defines its copies of warp_all, group_all and the exchange in its cells.
#pragma once
#include <lab/hopper.cuh>
#include <lab/math.cuh>

// -- maxima and sums over a warp and a block -------------------------------------------------------
// The order of the two block reductions sets the layout of their shared arrays in a kernel that uses both (chapter
// 05's rung 4 was measured with the max first).
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;  // fmaxf drops NaN: a NaN row is caught by the sum of its exponentials instead
}
__device__ __forceinline__ float block_max(float v) {
    __shared__ float part[32];
    __shared__ float total;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = warp_max(lane < nwarps ? part[lane] : NEG_INF);
        if (lane == 0) total = t;
    }
    __syncthreads();
    return total;
}
// The same maxima on unsigned bits (chapter 08: |x|'s bit pattern orders as |x| does, and NaN above inf): one
// redux instruction a warp.
__device__ __forceinline__ unsigned warp_max(unsigned v) { return __reduce_max_sync(0xffffffffu, v); }
__device__ __forceinline__ unsigned block_max(unsigned v) {
    __shared__ unsigned part[32];
    __shared__ unsigned total;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    if (lane == 0) part[warp] = v;
    __syncthreads();  // all warps' maxima are in shared memory before warp 0 reads them
    if (warp == 0) {
        const unsigned t = warp_max(lane < nwarps ? part[lane] : 0u);
        if (lane == 0) total = t;
    }
    __syncthreads();  // the total is written before any thread reads it
    return total;
}
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

// -- any op over a warp, and over a group of warps ----------------------------------------------------
// Over a warp: shuffles. Over a group of warps: through shared memory, one named barrier (the caller alternates
// the two buffers with `phase`).
__device__ __forceinline__ float shfl_xor(float v, int off) { return __shfl_xor_sync(0xffffffffu, v, off); }
__device__ __forceinline__ float2 shfl_xor(float2 v, int off) { return {shfl_xor(v.x, off), shfl_xor(v.y, off)}; }
template <typename S, typename Op> __device__ __forceinline__ S warp_all(S v, Op op) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = op(v, shfl_xor(v, off));
    return v;
}
// A barrier over one group of warps: named barrier 1 + g (0 is __syncthreads), or __syncwarp for a warp.
__device__ __forceinline__ void group_sync(int g, int threads) {
    if (threads == 32) __syncwarp();
    else asm volatile("bar.sync %0, %1;" :: "r"(1 + g), "r"(threads) : "memory");
}
template <typename S, typename Op>
__device__ __forceinline__ S group_all(S v, Op op, int g, int gw, unsigned& phase) {
    __shared__ S part[2][32];  // [buffer][warp of the block]
    v = warp_all(v, op);
    if (gw == 1) return v;
    S* mine = part[phase++ & 1] + g * gw;
    if ((threadIdx.x & 31) == 0) mine[(threadIdx.x >> 5) - g * gw] = v;
    group_sync(g, gw * 32);
    S t = mine[0];
    for (int k = 1; k < gw; ++k) t = op(t, mine[k]);  // the same order in every thread
    return t;
}

// -- over a cluster, by pushing: one one-way trip ------------------------------------------------------
// Each block writes its value into every peer's inbox with `st.async`, whose bytes complete on the peer's mbarrier,
// and waits for its own inbox to fill; where two cluster barriers make every block wait for the slowest one twice
// (the second time at exit). An inbox is `float2 inbox[k][16]` (one slot per rank, CL <= 16) with its mbarrier
// `inbox_bar[k]`; a value travels as a float2 (as2 / from2 convert; overload them for another type).

// 8 bytes into block `rank`'s shared memory at the address of `local` there; completes on its `bar`.
__device__ __forceinline__ void push8(float2* local, u64* bar, unsigned rank, float2 v) {
    asm volatile("{\n.reg .b32 ra, rb;\nmapa.shared::cluster.u32 ra, %0, %2;\nmapa.shared::cluster.u32 rb, %1, %2;\n"
                 "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [ra], {%3, %4}, [rb];\n}\n"
                 :: "r"(smem_u32(local)), "r"(smem_u32(bar)), "r"(rank), "f"(v.x), "f"(v.y) : "memory");
}
__device__ __forceinline__ float2 as2(float v) { return make_float2(v, 0.f); }
__device__ __forceinline__ float2 as2(float2 v) { return v; }
__device__ __forceinline__ void from2(float2 v, float& s) { s = v.x; }
__device__ __forceinline__ void from2(float2 v, float2& s) { s = v; }
// `parity`: the phase of inbox k's mbarrier this exchange completes (a kernel that exchanges row after row
// alternates it); `first`: the block's first exchange, which first waits for the arrive half of a cluster barrier
// made once the block's inboxes were initialised (so no block pushes into a peer's inbox before that).
template <int CL, typename S, typename Op>
__device__ __forceinline__ S cluster_all(S v, Op op, float2 (*inbox)[16], u64* inbox_bar, int k, unsigned parity,
                                         bool first) {
    if constexpr (CL == 1) {
        return v;
    } else {
        const unsigned me = cluster_rank();
        if (first) cluster_wait_acquire();  // every peer's inboxes are initialised: pass 1 ran meanwhile
        if (threadIdx.x == 0) mbar_expect_tx(inbox_bar + k, CL * 8);
        if (threadIdx.x < CL) push8(&inbox[k][me], inbox_bar + k, threadIdx.x, as2(v));  // into peer threadIdx.x
        mbar_wait(inbox_bar + k, parity);
        S t, o;
        from2(inbox[k][0], t);
        for (int r = 1; r < CL; ++r) {  // in rank order: every block gets the same result
            from2(inbox[k][r], o);
            t = op(t, o);
        }
        return t;
    }
}
// The push half of an exchange: thread 0 arms inbox k's mbarrier, threads < CL write v into every peer's slot.
template <int CL, typename S>
__device__ __forceinline__ void push_all(S v, float2 (*inbox)[16], u64* bar, int k, bool first) {
    if constexpr (CL > 1) {
        if (first) cluster_wait_acquire();  // every peer's inboxes are set up
        const unsigned me = cluster_rank();
        if (threadIdx.x == 0) mbar_expect_tx(bar + k, CL * 8);
        if (threadIdx.x < CL) push8(&inbox[k][me], bar + k, threadIdx.x, as2(v));
    }
}
// The read half: wait for inbox k's phase, fold the CL values in rank order (the same result in every block).
template <int CL, typename S, typename Op>
__device__ __forceinline__ S take_all(S mine, Op op, float2 (*inbox)[16], u64* bar, int k, unsigned parity) {
    if constexpr (CL == 1) {
        return mine;
    } else {
        mbar_wait(bar + k, parity);
        S t, o;
        from2(inbox[k][0], t);
        for (int r = 1; r < CL; ++r) {
            from2(inbox[k][r], o);
            t = op(t, o);
        }
        return t;
    }
}
