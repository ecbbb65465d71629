// lab/row_share.cuh: a row's share staged in shared memory by the copy engine, for row-wise kernels.
//
//   Share<T, CL>                   one group of warps' share of a row: where it is, its chunks, their mbarriers
//   share_start<T, CL>(x, ...)     set the block up and issue the copies; with CL > 1, the inboxes' mbarriers too
//   MAX_CHUNKS                     mbarriers a block has for its chunks, over all its groups
//
// A block holds `groups` rows, one per group of `gw` warps (short rows), or with CL > 1 is one group holding a
// share of a row split over the cluster (rank 0 keeps the scalar head and tail, each rank a run of the row's
// 16-byte aligned body vectors [v0, v0 + nv)). One thread of each group asks the copy engine for the whole share
// at once (`cp.async.bulk`), in chunks of `chunk` vectors, each completing on its own mbarrier: the share is in
// flight from the first cycle and pass 1 starts on the first chunk to land. The data stays in its storage type.
//
// Chapter 03 explains it (rung 6, `softmax_bulk`, which still writes it out); chapters 04 and 05 include it (their
// rungs 5).
#pragma once
#include <lab/hopper.cuh>
#include <lab/vec.cuh>

template <typename T, int CL> struct Share {
    int g, gw, gt, gthreads, rank, row;
    const T* p;
    int head, tail0, v0, nv, nch, chunk;
    const uint4* buf;
    u64* full;
    bool has_h, has_t;

    __device__ __forceinline__ const uint4* wait(int c) const {  // chunk c, once it has landed
        mbar_wait(full + c, 0);
        return buf + (size_t)c * chunk;
    }
    __device__ __forceinline__ const uint4* at(int c) const { return buf + (size_t)c * chunk; }
    __device__ __forceinline__ int size(int c) const { return min(chunk, nv - c * chunk); }
};

constexpr int MAX_CHUNKS = 32;  // mbarriers per block, over all its groups
// The kernels run 256 threads a block and ask for registers for three blocks an SM (`__launch_bounds__(256, 3)`):
// the largest share, 64 KB, fits three to an SM's 228 KB, so one block's exchange and stores overlap two
// others' copies.

// Sets the block up: each group's row share, its chunks' mbarriers, the copies issued by the group's first
// thread; with CL > 1 the inboxes' mbarriers too (`exchanges` of them), and the arrival half of a cluster barrier
// whose wait comes just before the first push (cluster_all's `first`), so that no block pushes into a peer whose
// inbox is not initialised yet, and pass 1 runs while the peers arrive. Only the threads that initialised
// mbarriers fence (a cluster-scope fence in every thread was the top stall in Nsight Compute, in chapter 03's
// rung 6).
template <typename T, int CL>
__device__ __forceinline__ Share<T, CL> share_start(const T* x, int rows, int cols, int gw, int chunk, int slots,
                                                    u64* inbox_bar, int exchanges) {
    constexpr int N = V16<T>::N;
    extern __shared__ uint4 stage[];
    __shared__ u64 full[MAX_CHUNKS];
    Share<T, CL> s;
    s.gw = gw;
    s.gthreads = gw * 32;
    s.g = threadIdx.x / s.gthreads;
    s.gt = threadIdx.x % s.gthreads;
    const int groups = blockDim.x / s.gthreads;
    s.rank = CL > 1 ? (int)cluster_rank() : 0;
    s.row = (int)(blockIdx.x / CL) * groups + s.g;
    s.chunk = chunk;
    s.buf = stage + (size_t)s.g * slots * chunk;
    s.full = full + s.g * slots;
    const int row = min(s.row, rows - 1);  // a group past the last row idles (nv = 0 below)
    s.p = x + (size_t)row * cols;
    s.head = head_len(s.p, cols);
    const int nvec = (cols - s.head) / N, per = (nvec + CL - 1) / CL;
    s.tail0 = s.head + nvec * N;
    s.v0 = min(nvec, s.rank * per);
    s.nv = s.row < rows ? min(nvec, s.v0 + per) - s.v0 : 0;
    s.nch = (s.nv + chunk - 1) / chunk;
    s.has_h = s.row < rows && s.rank == 0 && s.gt < s.head;
    s.has_t = s.row < rows && s.rank == 0 && s.tail0 + s.gt < cols;
    if (s.gt == 0)
        for (int c = 0; c < s.nch; ++c) mbar_init(s.full + c, 1);
    if (CL > 1 && threadIdx.x == 0)
        for (int k = 0; k < exchanges; ++k) mbar_init(inbox_bar + k, 1);
    if (s.gt == 0 || (CL > 1 && threadIdx.x == 0))  // the threads that initialised mbarriers publish them
        fence_mbar_init();
    __syncthreads();
    if (s.gt == 0) {
        const uint4* src = reinterpret_cast<const uint4*>(s.p + s.head) + s.v0;
        for (int c = 0; c < s.nch; ++c) {
            mbar_expect_tx(s.full + c, s.size(c) * 16);
            bulk_load(const_cast<uint4*>(s.at(c)), src + (size_t)c * chunk, s.size(c) * 16, s.full + c);
        }
    }
    if constexpr (CL > 1)  // this block's inboxes are ready; the matching wait is just before the first push
        cluster_arrive_relaxed();
    return s;
}
