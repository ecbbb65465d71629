// lab/mma.cuh: Ampere's warp-level tensor-core instructions (mma.sync, ldmatrix, sm_80+) and the swizzle that
// feeds them from shared memory without bank conflicts.
//
//   swz(row, chunk)             byte offset of 16-byte chunk `chunk` of row `row` in a tile of 128-byte rows, XOR-
//                               swizzled: chunk c of row r is stored at chunk c ^ (r & 7), so the 8 rows one
//                               ldmatrix phase reads hit 8 different bank groups (and TMA's 128-byte swizzle
//                               writes the same layout)
//   ldmatrix_x4(r, addr)        four 8x8 b16 matrices from shared memory (32-bit address) into a warp's fragments
//   mma16816(d, a, b, T())      D += A B, m16n8k16, fp32 accumulate; T = __nv_bfloat16 or __half picks the inputs
//   pack2(lo, hi, T())          two floats rounded to T, packed in one 32-bit register (low half first)
//
// Chapter 06 explains them (rung 2, `mma_gemm`); chapter 07's mma.sync attention writes the same helpers in its
// cells until it moves onto this header.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <lab/smem.cuh>

__device__ __forceinline__ unsigned swz(int row, int chunk) { return row * 128 + ((chunk ^ (row & 7)) << 4); }

__device__ __forceinline__ void ldmatrix_x4(unsigned* r, unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void mma16816(float* d, const unsigned* a, const unsigned* b, __nv_bfloat16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma16816(float* d, const unsigned* a, const unsigned* b, __half) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ unsigned pack2(float lo, float hi, __nv_bfloat16) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&v);
}
__device__ __forceinline__ unsigned pack2(float lo, float hi, __half) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&v);
}
