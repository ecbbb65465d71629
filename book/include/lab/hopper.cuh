// lab/hopper.cuh: Hopper's asynchronous machinery (sm_90), as thin wrappers over its PTX.
//
//   u64, smem_u32(p)                   a 64-bit word; a generic pointer as a 32-bit shared-memory address
//   mbar_init, mbar_expect_tx,         mbarriers: a phase completes when `count` threads have arrived and the
//   mbar_wait, fence_mbar_init         expected bytes have landed; publish the inits to the cluster
//   bulk_load(dst, src, bytes, bar)    the copy engine (cp.async.bulk, TMA without a tensor map): global to shared,
//                                      completing on an mbarrier
//   proxy_fence()                      order this thread's generic-proxy accesses to shared memory before later
//                                      async-proxy ones (a copy into a slot that was just read)
//   cluster_rank()                     this block's rank in its cluster (%cluster_ctarank)
//   cluster_arrive_relaxed(),          the two halves of a cluster barrier, apart, so that work runs between them
//   cluster_wait_acquire()
//
// Chapter 03 explains the copy engine and mbarriers (rung 6, `softmax_bulk`) and chapter 06 the tensor-map TMA and
// wgmma (rung 3 on). Chapters 04 and 05 include it; 03, 06 and 07 still write the same mbarrier helpers in their
// cells (06's and 07's TMA, wgmma descriptors and fences belong here too).
#pragma once

typedef unsigned long long u64;  // NVRTC has no <cstdint>

__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// -- mbarriers ------------------------------------------------------------------------------------------------
__device__ __forceinline__ void mbar_init(u64* bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_u32(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(u64* bar, unsigned bytes) {  // arrive, and expect `bytes` more
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem_u32(bar)), "r"(bytes) : "memory");
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

// -- clusters --------------------------------------------------------------------------------------------------
__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait_acquire() { asm volatile("barrier.cluster.wait.acquire;" ::: "memory"); }
