// lab/smem.cuh: shared-memory addresses, for the PTX that takes them as 32-bit operands.
//
//   u64                  a 64-bit word (mbarriers, descriptors): NVRTC has no <cstdint>
//   smem_u32(p)          a generic pointer into shared memory as the 32-bit shared-state-space address that
//                        ldmatrix, cp.async, mbarrier and TMA instructions take
//
// Chapter 03 explains it (rung 6, `softmax_bulk`: the first PTX that needs a shared address). Every header that
// wraps such PTX includes it (hopper.cuh, mma.cuh).
#pragma once

typedef unsigned long long u64;  // NVRTC has no <cstdint>

__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
