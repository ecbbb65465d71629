// lab/row_stream.cuh: persistent clusters walking rows, each block's share of a row copied into a ring of slots.
//
//   RowStream<T, CL>        one block's walk: its cluster's rows (cluster, cluster + clusters, ...), its share of
//                           each row (16-byte vectors [v0, v0 + nv), `per` a block), `stages` slots with an
//                           mbarrier each, the copy engine filling them
//   stream_plan<T, CL>(..)  the rows this block's cluster walks
//   .start(smem, skip, ..)  the block's share of a row and its slots; thread 0 initialises the slots' mbarriers
//                           (and the inboxes' with CL > 1) and issues the first `stages` copies; the block arrives
//                           on a cluster barrier whose wait is the first exchange's (cluster_all's, push_all's
//                           `first`)
//   .row(it), .fetch(it),   row number `it` of the walk; its copy into slot it % stages; its share once landed;
//   .wait(it), .refill(it)  after a barrier that ends every read of row it's slot, thread 0 copies row it + stages
//   STREAM_MAX_STAGES       slots a block can have
//
// A block takes its share of a row out of the slot into registers, so the slot takes a later row's copy while this
// row's reductions and stores run. Rows must be whole 16-byte vectors (cols a multiple of 16 / sizeof(T)).
// Chapter 05 explains it (rungs 6 and 7, `fused_stream`, `fused_pipe`); chapters 04 and 05 include it (their rungs
// 6 and 7); chapter 03's rung 8 writes the same walk out.
#pragma once
#include <lab/hopper.cuh>
#include <lab/vec.cuh>

constexpr int STREAM_MAX_STAGES = 8;

template <typename T, int CL> struct RowStream {
    const T* x;
    int cols, stages, rank, cluster, clusters, nrows, per, v0, nv;
    uint4* slots;  // [stages][per]
    u64* full;     // [stages]: the slot's copy has landed

    __device__ __forceinline__ size_t row(int it) const { return (size_t)cluster + (size_t)it * clusters; }
    __device__ __forceinline__ void fetch(int it) const {  // row it's share into its slot (one thread)
        const int s = it % stages;
        mbar_expect_tx(full + s, nv * 16);
        bulk_load(slots + (size_t)s * per, reinterpret_cast<const uint4*>(x + row(it) * cols) + v0, nv * 16, full + s);
    }
    __device__ __forceinline__ const uint4* wait(int it) const {  // row it's share, once it has landed
        const uint4* b = slots + (size_t)(it % stages) * per;
        mbar_wait(full + it % stages, (unsigned)(it / stages) & 1);
        return b;
    }
    __device__ __forceinline__ void refill(int it) const {  // thread 0: row it + stages into row it's slot, if any
        if (threadIdx.x == 0 && nv > 0 && it + stages < nrows) fetch(it + stages);
    }
    // The block's share of each row, and its slots: `stages` of `per` vectors, `skip` shares into `smem` (what a
    // kernel keeps before them: rung 7 the share's weights). Thread 0 initialises the slots' mbarriers and, with
    // CL > 1, `inboxes` inbox mbarriers, and publishes them; then it issues the first copies. With CL > 1 the block
    // arrives on the cluster barrier whose wait comes just before its first push, so that no block pushes into a
    // peer whose inbox is not initialised yet.
    __device__ __forceinline__ void start(uint4* smem, int skip, u64* full_, u64* inbox_bar, int inboxes) {
        constexpr int N = V16<T>::N;
        const int nvec = cols / N;
        per = (nvec + CL - 1) / CL;
        v0 = min(nvec, rank * per);
        nv = min(nvec, v0 + per) - v0;
        slots = smem + skip * per;
        full = full_;
        if (threadIdx.x == 0) {
            for (int s = 0; s < stages; ++s) mbar_init(full + s, 1);
            if (CL > 1) for (int k = 0; k < inboxes; ++k) mbar_init(inbox_bar + k, 1);
            fence_mbar_init();
        }
        __syncthreads();
        if (threadIdx.x == 0 && nv > 0)
            for (int it = 0; it < min(stages, nrows); ++it) fetch(it);
        if constexpr (CL > 1)  // this block's inboxes are ready; the matching wait is in the first exchange
            cluster_arrive_relaxed();
    }
};

// The walk of this block: as many clusters as the grid holds, cluster c taking rows c, c + clusters, ... in the same
// order in all its blocks (nrows = 0: the whole cluster has nothing to do, and leaves); the block of rank r takes
// the r-th share of each row (start()).
template <typename T, int CL>
__device__ __forceinline__ RowStream<T, CL> stream_plan(const T* x, int rows, int cols, int stages) {
    RowStream<T, CL> s;
    s.rank = CL > 1 ? (int)cluster_rank() : 0;
    s.x = x;
    s.cols = cols;
    s.stages = stages;
    s.cluster = (int)(blockIdx.x / CL);
    s.clusters = (int)(gridDim.x / CL);
    s.nrows = rows > s.cluster ? (rows - s.cluster + s.clusters - 1) / s.clusters : 0;
    return s;
}
