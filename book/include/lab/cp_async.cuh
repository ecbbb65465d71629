// lab/cp_async.cuh: Ampere's asynchronous copy (cp.async, sm_80+): 16 bytes from global to shared memory per thread,
// past the registers and the L1, in groups a thread can wait for.
//
//   cp_async16(smem, gmem, valid)    copy 16 bytes; when !valid nothing is read and the 16 bytes are zero-filled
//                                    (rows past a matrix's edge read as 0, never as stale shared memory)
//   cp_async16(smem, gmem)           copy 16 bytes, for tiles that lie wholly inside the matrix
//   cp_async16(addr, gmem, valid)    the same as the first, to a 32-bit shared-memory address (smem_u32 of a stage
//                                    plus a swizzled offset): tiles addressed as ldmatrix addresses them
//   cp_async_commit()                close the group of copies this thread has issued since the last commit
//   cp_async_wait<N>()               wait until at most N of this thread's groups are still in flight
//   cp_async_wait_all()              wait for all of them
//
// Chapter 02 explains it (the double-buffered SGEMM rung); chapters 06, 07 and 08 pipeline their mma.sync tiles
// with it (06 includes it; 02, 07 and 08 still write their own). The copies are only visible to the other threads after a wait and a __syncthreads().
#pragma once

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"((unsigned)__cvta_generic_to_shared(smem)), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async16(unsigned addr, const void* gmem, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(addr), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"((unsigned)__cvta_generic_to_shared(smem)), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::); }
