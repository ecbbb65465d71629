// lab/wgmma8.cuh: wgmma's 8-bit atoms (K = 32 a step: 32 bytes of a 128-byte swizzled row, like bf16's K = 16),
// both operands from shared memory, K-major (the only layout 8-bit wgmma reads), and the epilogues of 8-bit GEMMs.
//
//   mma8(float (&d)[64 | 128], da, db, scale_d)   D (+)= A B^T, m64n128k32 / m64n256k32, e4m3 x e4m3, fp32 accumulate
//   mma8(int (&d)[64 | 128], da, db, scale_d)     the same shapes, s8 x s8, s32 accumulate (exact)
//   store_scaled(d, C, M, N, r0, c0, sa, sw)      one warpgroup's m64nN accumulator times sa[row] sw[col] to C (bf16)
//   store_i32(d, C, M, N, r0, c0)                 one warpgroup's m64nN s32 accumulator to C as it is (int32)
//   store_scaled_tma(d, buf, mapC, M, N, r0, c0, sa, sw, bar_id)
//                                                 store_scaled through shared memory and TMA stores (rung 3)
//
// scale_d = 0 overwrites D; da and db are desc_sw128 descriptors (lab/hopper.cuh). The register layout is
// lab/wgmma.cuh's (store_acc): register 4j + e of lane (g, t) of warp w is row 16w + g + 8 (e >> 1), column
// 8j + 2t + (e & 1). Chapter 10 explains them (section 3, the CUDA FP8 GEMM rungs, and section 4, INT8 on wgmma);
// only its rungs include this header.
#pragma once
#include <cuda_bf16.h>
#include <lab/wgmma.cuh>  // store_acc (bf16 out), the accumulator layout; lab/hopper.cuh

// -- atoms ------------------------------------------------------------------------------------------------------
// An asm statement's operand list is fixed text, one operand a register: the lists are spelled out once, here, as
// macros over the accumulator's constraint ("f" for fp32, "r" for s32), and each atom is one line of PTX.
#define LAB_REGS64 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19," \
                   "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37," \
                   "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55," \
                   "%56, %57, %58, %59, %60, %61, %62, %63"
#define LAB_REGS128 LAB_REGS64 \
                    ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81," \
                    "%82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99," \
                    "%100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114," \
                    "%115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define LAB_ACC8(c, d, i) "+" c(d[i]), "+" c(d[i + 1]), "+" c(d[i + 2]), "+" c(d[i + 3]), "+" c(d[i + 4]), \
                          "+" c(d[i + 5]), "+" c(d[i + 6]), "+" c(d[i + 7])
#define LAB_ACC64(c, d) LAB_ACC8(c, d, 0), LAB_ACC8(c, d, 8), LAB_ACC8(c, d, 16), LAB_ACC8(c, d, 24), \
                        LAB_ACC8(c, d, 32), LAB_ACC8(c, d, 40), LAB_ACC8(c, d, 48), LAB_ACC8(c, d, 56)
#define LAB_ACC128(c, d) LAB_ACC64(c, d), LAB_ACC8(c, d, 64), LAB_ACC8(c, d, 72), LAB_ACC8(c, d, 80), \
                         LAB_ACC8(c, d, 88), LAB_ACC8(c, d, 96), LAB_ACC8(c, d, 104), LAB_ACC8(c, d, 112), \
                         LAB_ACC8(c, d, 120)
// One wgmma with a predicate from scale_d (0: D = A B^T, else D += A B^T). e4m3 also takes the immediate scales of
// A and B (", 1, 1": neither negated); s8 takes none.
#define LAB_WGMMA8(op, regs, descs, scale, tail) \
    "{\n.reg .pred p;\nsetp.ne.b32 p, " scale ", 0;\n" \
    "wgmma.mma_async.sync.aligned." op " {" regs "}, " descs ", p" tail ";\n}\n"

__device__ __forceinline__ void mma8(float (&d)[64], u64 da, u64 db, int scale_d) {
    asm volatile(LAB_WGMMA8("m64n128k32.f32.e4m3.e4m3", LAB_REGS64, "%64, %65", "%66", ", 1, 1")
                 : LAB_ACC64("f", d) : "l"(da), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void mma8(float (&d)[128], u64 da, u64 db, int scale_d) {
    asm volatile(LAB_WGMMA8("m64n256k32.f32.e4m3.e4m3", LAB_REGS128, "%128, %129", "%130", ", 1, 1")
                 : LAB_ACC128("f", d) : "l"(da), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void mma8(int (&d)[64], u64 da, u64 db, int scale_d) {
    asm volatile(LAB_WGMMA8("m64n128k32.s32.s8.s8", LAB_REGS64, "%64, %65", "%66", "")
                 : LAB_ACC64("r", d) : "l"(da), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void mma8(int (&d)[128], u64 da, u64 db, int scale_d) {
    asm volatile(LAB_WGMMA8("m64n256k32.s32.s8.s8", LAB_REGS128, "%128, %129", "%130", "")
                 : LAB_ACC128("r", d) : "l"(da), "l"(db), "r"(scale_d));
}

// -- epilogues --------------------------------------------------------------------------------------------------
// Row-wise scales in the epilogue: y[r][c] = acc[r][c] sa[r] sw[c], rounded once to bf16. Rows past M and columns
// past N are neither read (their scales) nor written.
// A thread's two rows inside M and the tile's columns inside an even N (every tile but the edges) take the fast
// path: its column scales as 8-byte pairs, eight pairs a batch, so a warp waits for the scales four times a
// 128 x 256 tile rather than once for each of its 128 stores (Nsight Compute's long-scoreboard stalls, H100).
template <class Acc, int NREG>
__device__ __forceinline__ void store_scaled(const Acc (&d)[NREG], __nv_bfloat16* C, int M, int N, int r0, int c0,
                                             const float* __restrict__ sa, const float* __restrict__ sw) {
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
    const int row = r0 + 16 * warp + (lane >> 2), col = c0 + 2 * (lane & 3);
    constexpr int PAIRS = NREG / 4, BATCH = PAIRS < 8 ? PAIRS : 8;
    static_assert(PAIRS % BATCH == 0, "whole batches of column pairs");
    if (row + 8 < M && c0 + 2 * NREG <= N && N % 2 == 0 && (reinterpret_cast<size_t>(sw) & 7) == 0) {
        const float s0 = sa[row], s1 = sa[row + 8];
        __nv_bfloat16* y0 = C + (size_t)row * N + col;
        __nv_bfloat16* y1 = y0 + (size_t)8 * N;
#pragma unroll
        for (int j0 = 0; j0 < PAIRS; j0 += BATCH) {
            float2 w[BATCH];
#pragma unroll
            for (int j = 0; j < BATCH; ++j) w[j] = __ldg(reinterpret_cast<const float2*>(sw + col + 8 * (j0 + j)));
#pragma unroll
            for (int j = 0; j < BATCH; ++j) {
                const int i = 4 * (j0 + j);
                *reinterpret_cast<__nv_bfloat162*>(y0 + 8 * (j0 + j)) =
                    __floats2bfloat162_rn(float(d[i]) * s0 * w[j].x, float(d[i + 1]) * s0 * w[j].y);
                *reinterpret_cast<__nv_bfloat162*>(y1 + 8 * (j0 + j)) =
                    __floats2bfloat162_rn(float(d[i + 2]) * s1 * w[j].x, float(d[i + 3]) * s1 * w[j].y);
            }
        }
        return;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = row + 8 * h;
        if (r >= M) continue;
        const float s = sa[r];
#pragma unroll
        for (int j = 0; j < NREG / 4; ++j) {
            const int c = col + 8 * j;
            if (c >= N) continue;
            const float w0 = sw[c], w1 = c + 1 < N ? sw[c + 1] : 0.f;
            __nv_bfloat162 v = __floats2bfloat162_rn(float(d[4 * j + 2 * h]) * s * w0,
                                                     float(d[4 * j + 2 * h + 1]) * s * w1);
            if (c + 1 < N && N % 2 == 0) {
                *reinterpret_cast<__nv_bfloat162*>(C + (size_t)r * N + c) = v;
            } else {
                C[(size_t)r * N + c] = v.x;
                if (c + 1 < N) C[(size_t)r * N + c + 1] = v.y;
            }
        }
    }
}

// store_scaled's y = acc sa[row] sw[col] through shared memory and TMA stores: chapter 06's rung 6 epilogue
// (store_acc_tma, in its cell until that chapter's next run on the H200) with the row-wise scales. The warpgroup's
// 64 x N tile leaves as 64 x 64 bf16 boxes through two 8 KB buffers at `buf` (1024-byte aligned), laid out in the
// 128-byte swizzle mapC expects (16-byte chunk j of row r at chunk j ^ (r & 7)): a warp's 4-byte st.shared hit 32
// banks. Thread 0 of the warpgroup stores each box and waits, before a buffer is rewritten, only until the store
// two boxes back has read it; the last stores drain under the next tile's main loop (bulk_wait_all before the
// block exits). The TMA clips the box at M and N: only the scales need bounds. mapC: labmagic.tensor_map_2d(y,
// (64, 64)), N a multiple of 8; bar_id: a named barrier of this warpgroup's own (not 0).
template <class Acc, int NREG>
__device__ __forceinline__ void store_scaled_tma(const Acc (&d)[NREG], unsigned char* buf, const void* mapC, int M,
                                                 int N, int r0, int c0, const float* __restrict__ sa,
                                                 const float* __restrict__ sw, int bar_id) {
    static_assert(NREG % 32 == 0, "whole 64-column boxes");
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, leader = threadIdx.x % 128 == 0;
    const int g = lane >> 2, t = lane & 3, row = r0 + 16 * warp + g;
    const float s[2] = {row < M ? sa[row] : 0.f, row + 8 < M ? sa[row + 8] : 0.f};
    const bool pairs = (reinterpret_cast<size_t>(sw) & 7) == 0;
#pragma unroll
    for (int c = 0; c < NREG / 32; ++c) {  // 64-column boxes
        const int col = c0 + 64 * c + 2 * t;  // this thread's first column of the box (even: c0 is)
        float2 w[8];  // the column scales first: their loads fly while the thread waits for the buffer
        if (pairs && c0 + 64 * c + 64 <= N) {
#pragma unroll
            for (int jj = 0; jj < 8; ++jj) w[jj] = __ldg(reinterpret_cast<const float2*>(sw + col + 8 * jj));
        } else {
#pragma unroll
            for (int jj = 0; jj < 8; ++jj) {
                const int cj = col + 8 * jj;
                w[jj] = make_float2(cj < N ? sw[cj] : 0.f, cj + 1 < N ? sw[cj + 1] : 0.f);
            }
        }
        unsigned char* b = buf + (c & 1) * 8192;
        if (leader) bulk_wait_read<1>();
        warpgroup_sync(bar_id);  // the buffer's previous store has read it
#pragma unroll
        for (int jj = 0; jj < 8; ++jj)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int j = 8 * c + jj, r = 16 * warp + g + 8 * h;
                const __nv_bfloat162 v = __floats2bfloat162_rn(float(d[4 * j + 2 * h]) * s[h] * w[jj].x,
                                                               float(d[4 * j + 2 * h + 1]) * s[h] * w[jj].y);
                *reinterpret_cast<__nv_bfloat162*>(b + r * 128 + ((jj ^ (r & 7)) << 4) + 4 * t) = v;
            }
        proxy_fence();  // this thread's generic-proxy writes become visible to the TMA (async proxy)
        warpgroup_sync(bar_id);
        if (leader) {
            tma_store(mapC, b, c0 + 64 * c, r0);
            bulk_commit();
        }
    }
}

// The exact s32 products, as torch._int_mm returns them: pairs as one 8-byte store when N is even.
template <int NREG>
__device__ __forceinline__ void store_i32(const int (&d)[NREG], int* C, int M, int N, int r0, int c0) {
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
    const int row = r0 + 16 * warp + (lane >> 2), col = c0 + 2 * (lane & 3);
#pragma unroll
    for (int j = 0; j < NREG / 4; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = row + 8 * h, c = col + 8 * j;
            if (r >= M || c >= N) continue;
            if (c + 1 < N && N % 2 == 0) {
                *reinterpret_cast<int2*>(C + (size_t)r * N + c) = make_int2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
            } else {
                C[(size_t)r * N + c] = d[4 * j + 2 * h];
                if (c + 1 < N) C[(size_t)r * N + c + 1] = d[4 * j + 2 * h + 1];
            }
        }
}
