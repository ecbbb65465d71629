// lab/hopper.cuh: Hopper's asynchronous machinery (sm_90), as thin wrappers over its PTX.
//
//   u64, smem_u32(p)                   (lab/smem.cuh) a 64-bit word; a generic pointer as a 32-bit shared address
//   mbar_init, mbar_expect_tx,         mbarriers: a phase completes when `count` threads have arrived and the
//   mbar_arrive, mbar_wait,            expected bytes have landed; publish the inits to the cluster
//   fence_mbar_init
//   bulk_load(dst, src, bytes, bar)    the copy engine (cp.async.bulk, TMA without a tensor map): global to shared,
//                                      completing on an mbarrier
//   tma_load(dst, map, bar, col, row)  the tensor-map TMA: one box of a 2-D tensor (labmagic.tensor_map_2d) into
//                                      shared memory, completing on an mbarrier; tma_load_multicast: into the same
//                                      offset of every block of the cluster in `mask`
//   tma_store, bulk_commit,            shared memory to global through a tensor map, tracked by bulk groups; wait
//   bulk_wait_read<N>, bulk_wait_all   until only N groups may still read their source, or until all are done
//   proxy_fence()                      order this thread's generic-proxy accesses to shared memory before later
//                                      async-proxy ones (a copy into a slot that was just read, a TMA store of
//                                      what was just written)
//   align1024(p)                       p rounded up to 1024 bytes of shared memory, where the 128-byte swizzle
//                                      repeats (TMA boxes and wgmma tiles in that swizzle start there)
//   desc_sw128(tile)                   wgmma's descriptor of a K-major tile of 128-byte rows in the 128-byte swizzle
//   wgmma_fence, wgmma_commit,         order, close and wait for a warpgroup's asynchronous wgmma groups
//   wgmma_wait<N>
//   setmaxnreg_dec<N>, _inc<N>         give a warpgroup's registers back / take more (warp specialization)
//   warpgroup_sync(id)                 a named barrier over the 128 threads of one warpgroup
//   cluster_rank()                     this block's rank in its cluster (%cluster_ctarank)
//   cluster_arrive_relaxed(),          the two halves of a cluster barrier, apart, so that work runs between them
//   cluster_wait_acquire()
//   cluster_sync()                     both halves at once (release, acquire), reachable by diverged warps
//   mbar_arrive_cluster(bar, cta)      arrive on block `cta`'s copy of an mbarrier
//   cluster_ptr(p, rank)               the generic address of the same shared variable in block `rank`
//
// Chapter 03 explains the copy engine and mbarriers (rung 6, `softmax_bulk`) and chapter 06 the tensor-map TMA,
// wgmma, warp specialization and clusters (rungs 3 to 7). Chapters 04, 05 and 06 include it; 03 and 07 still write
// the same mbarrier, TMA and wgmma helpers in their cells.
#pragma once
#include <lab/smem.cuh>

// -- mbarriers ------------------------------------------------------------------------------------------------
__device__ __forceinline__ void mbar_init(u64* bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_u32(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(u64* bar, unsigned bytes) {  // arrive, and expect `bytes` more
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u64* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(u64* bar, unsigned parity) {  // until the phase of this parity is done
    unsigned done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
    } while (!done);
}
// The initialised mbarriers, visible to the async proxy and to the cluster's peers (which may arrive on them).
__device__ __forceinline__ void fence_mbar_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

// -- the copy engine -------------------------------------------------------------------------------------------
// `bytes` (a multiple of 16) from global `src` to shared `dst`, both 16-byte aligned; completes on `bar`.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, unsigned bytes, u64* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(smem_u32(dst)), "l"(src), "r"(bytes), "r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void proxy_fence() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// -- the tensor-map TMA: one thread moves a whole box; its bytes count against the mbarrier's expected transaction
// `map` is a CUtensorMap in global memory (labmagic.tensor_map_2d); (col, row) is the box's corner in elements.
__device__ __forceinline__ void tma_load(void* dst, const void* map, u64* bar, int col, int row) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
                 :: "r"(smem_u32(dst)), "l"(map), "r"(smem_u32(bar)), "r"(col), "r"(row) : "memory");
}
// The same box into the same offset of every block of the cluster in `mask`, each completing on its own `bar`.
__device__ __forceinline__ void tma_load_multicast(void* dst, const void* map, u64* bar, int col, int row, unsigned short mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%3, %4}], [%2], %5;"
                 :: "r"(smem_u32(dst)), "l"(map), "r"(smem_u32(bar)), "r"(col), "r"(row), "h"(mask) : "memory");
}
// TMA stores: shared memory -> global through the tensor map, tracked by bulk groups.
__device__ __forceinline__ void tma_store(const void* map, const void* src, int col, int row) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
                 :: "l"(map), "r"(smem_u32(src)), "r"(col), "r"(row) : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void bulk_wait_read() {  // the N newest groups may still be reading
    asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory");
}
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

__device__ __forceinline__ unsigned char* align1024(unsigned char* p) {  // the 128-byte swizzle repeats every 1024 B
    return p + ((1024 - (smem_u32(p) & 1023)) & 1023);
}

// -- wgmma: a warpgroup's asynchronous D (+)= A B^T from shared memory ------------------------------------------
// Descriptor of a K-major tile written by TMA with the 128-byte swizzle: rows of 64 bf16 (128 B), groups of
// 8 rows 1024 B apart (the stride byte offset); the leading byte offset is unused for this layout (1).
// Stepping K by 16 inside the 128-byte row adds 32 B to the start address: the hardware applies the swizzle.
__device__ __forceinline__ u64 desc_sw128(const void* tile) {
    return (u64)((smem_u32(tile) & 0x3FFFF) >> 4) | (1ull << 16) | ((u64)(1024 >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {  // at most N groups still in flight
    asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
}

// -- warp specialization ---------------------------------------------------------------------------------------
// Every warp of a warpgroup executes these together: the producer's warpgroup gives registers back (dec), the
// consumers' take them (inc), up to N a thread.
template <int N> __device__ __forceinline__ void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(N)); }
template <int N> __device__ __forceinline__ void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(N)); }
__device__ __forceinline__ void warpgroup_sync(int id) { asm volatile("bar.sync %0, 128;" :: "r"(id) : "memory"); }

// -- clusters --------------------------------------------------------------------------------------------------
__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait_acquire() { asm volatile("barrier.cluster.wait.acquire;" ::: "memory"); }
__device__ __forceinline__ void cluster_sync() {  // not .aligned: a warp may reach it diverged (its thread 0 produced)
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
// Arrive on block `cta`'s copy of `bar`. Default semantics (release at CTA scope): a `.release.cluster` arrive
// compiles to a MEMBAR.ALL.GPU first, a GPU-wide fence for every arrival. What such an arrival publishes is
// usually that this block is done *reading* a slot, which needs no fence.
__device__ __forceinline__ void mbar_arrive_cluster(u64* bar, unsigned cta) {
    asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n"
                 :: "r"(smem_u32(bar)), "r"(cta) : "memory");
}
// The generic address of the same shared-memory variable in block `rank` of the cluster (plain loads read it).
__device__ __forceinline__ const float* cluster_ptr(const float* p, unsigned rank) {
    u64 out;
    asm("mapa.u64 %0, %1, %2;" : "=l"(out) : "l"(p), "r"(rank));
    return reinterpret_cast<const float*>(out);
}
