// lab/flash.cuh: the FlashAttention forward that chapter 07's Hopper rungs share: the wgmma products, online softmax
// and K/V stages of cuda_wgmma to cuda_wgmma_pingpong, and the quad reductions its mma.sync loop uses too.
//
//   quad_max(x), quad_sum(x)              over the four lanes that hold a row of an mma fragment (two shfl.xor)
//
//   wgmma (sm_90a), D = 128, tiles of 128 keys, two warpgroups of 64 query rows:
//   BOX                                   bytes of one 128-row x 64-column box of a tensor map
//   desc_sw128_mn(tile, next_64_cols)     the descriptor of an N-major tile (V as P V's B operand, transposed)
//   wgmma_ss(d, da, db, scale_d, T()),    m64n128k16 with A and B in shared memory (for bf16: lab/wgmma.cuh's
//   wgmma_rs_t(d, a, db, T())             wgmma_128), with A in registers and B N-major
//   pin(r)                                registers an in-flight wgmma reads or writes, held in place
//   issue_qk<T>, issue_pv<T>              S = Q K^T, O += P V for a warpgroup's rows: one commit group each
//   online_softmax<CAUSAL>, rescale_o,    one tile's softmax in place (s becomes P, m and l move on); O times
//   pack_p<T>                             alpha; P as the A fragments of P V
//   KVStages<STAGES, EMPTY>, kv_stages    the block's shared memory set up: Q, STAGES stages of K and V, mbarriers
//     .tile(t), .issue(t), .refill(t)     tile t's stage; its TMA copies; the same once the stage is free (EMPTY:
//                                         once both warpgroups have released the tile before it there)
//     .wait(t), .release(t)               until tile t has landed; this warpgroup is done with it
//     .load_q(), .wait_q()                Q's copy, and until it has landed
//   start_copies<PRODUCER, AHEAD>         the first copies: thread 0's, or a producer warpgroup's (all of them)
//   store_o<T>                            O / l and the lse of a thread's two rows
//
// Chapter 07 explains them (section "The CUDA kernels": the Hopper rungs `cuda_wgmma` to `cuda_wgmma_pingpong`;
// quad_max and quad_sum also serve the mma.sync loop of `cuda_flash` and `cuda_fa1`, which that cell holds); only
// its prefill rungs include it, each cell holding its schedule. The atoms below them are chapter 06's
// (lab/mma.cuh, lab/wgmma.cuh), the mbarriers and TMA chapter 03's and 06's (lab/hopper.cuh).
#pragma once
#include <lab/math.cuh>   // NEG_INF, ex2: 2^x in one MUFU.EX2
#include <lab/mma.cuh>    // pack2; smem_u32 (lab/smem.cuh)
#include <lab/wgmma.cuh>  // wgmma_128; mbar_*, tma_load, desc_sw128, wgmma fences, setmaxnreg (lab/hopper.cuh)
#include <lab/wgmma8.cuh> // LAB_REGS64, LAB_ACC64: a wgmma's 64 accumulator operands, spelled out once

__device__ __forceinline__ float quad_max(float x) {  // the four lanes that share a row of an mma fragment
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// -- wgmma: the Hopper rungs ----------------------------------------------------------------------------------
constexpr int BOX = 128 * 128;  // bytes of one 128-row x 64-column box of a tensor map

// V as the B operand of P V is K x N with N (the head dimension) contiguous: "N-major", read with the transpose
// bit. Its 128-byte-swizzled canonical form: 64 contiguous N values a row (one TMA box column), 8 K rows per
// 1024-byte atom (the stride byte offset); the leading byte offset steps N by 64, to the next box.
__device__ __forceinline__ u64 desc_sw128_mn(const void* tile, unsigned next_64_cols) {
    return (u64)((smem_u32(tile) & 0x3FFFF) >> 4) | ((u64)(next_64_cols >> 4) << 16) | ((u64)(1024 >> 4) << 32) | (1ull << 62);
}
// wgmma m64n128k16, fp32 accumulate: `wgmma_ss` D (+)= A B^T with A and B K-major in shared memory;
// `wgmma_rs_t` D += A B with A in registers (an mma.sync A fragment a warp) and B N-major in shared memory.
__device__ __forceinline__ void wgmma_ss(float (&d)[64], u64 da, u64 db, int scale_d, __nv_bfloat16) {
    wgmma_128(d, da, db, scale_d);  // chapter 06's atom; fp16 below, the same with .f16 inputs
}
__device__ __forceinline__ void wgmma_ss(float (&d)[64], u64 da, u64 db, int scale_d, __half) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {" LAB_REGS64 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : LAB_ACC64("f", d)
                 : "l"(da), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void wgmma_rs_t(float (&d)[64], const unsigned (&a)[4], u64 db, __nv_bfloat16) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" LAB_REGS64 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
                 : LAB_ACC64("f", d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
__device__ __forceinline__ void wgmma_rs_t(float (&d)[64], const unsigned (&a)[4], u64 db, __half) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {" LAB_REGS64 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
                 : LAB_ACC64("f", d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
// Registers that an in-flight wgmma reads or writes are pinned by an empty asm that claims to use them: without
// it the compiler may move arithmetic on them across wgmma.wait_group (nothing else ties the two together).
template <int N> __device__ __forceinline__ void pin(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i]) :: "memory");
}

// S = Q K^T over D = 128 for this warpgroup's 64 rows: k16 steps 0-3 in the first box of each, 4-7 in the
// second. Issued and committed as one group, not waited for.
template <typename T>
__device__ __forceinline__ void issue_qk(float (&s)[64], const unsigned char* sQ, const unsigned char* kt, int wg) {
    wgmma_fence();
#pragma unroll
    for (int kc = 0; kc < 8; ++kc)
        wgmma_ss(s, desc_sw128(sQ + (kc >> 2) * BOX + wg * 64 * 128 + 32 * (kc & 3)),
                 desc_sw128(kt + (kc >> 2) * BOX + 32 * (kc & 3)), kc > 0, T());
    wgmma_commit();
}
// O += P V: P from registers (the S accumulator of n8 tiles 2kk, 2kk + 1 is the A fragment of keys
// 16kk..16kk+15), V N-major from shared memory, 16 keys (2048 B of each box) a step. One group, not waited for.
template <typename T>
__device__ __forceinline__ void issue_pv(float (&o)[64], const unsigned (&pa)[8][4], const unsigned char* vt) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) wgmma_rs_t(o, pa[kk], desc_sw128_mn(vt + kk * 2048, BOX), T());
    wgmma_commit();
}
// The online softmax of one tile of raw scores, in place: s becomes P (fp32), m and l move on, and alpha is what
// O must be multiplied by before P V. Scores are masked to -inf; the scale goes into one FFMA with the running
// maximum (m is kept scaled, in log2 units): p = 2^(s c - m c).
template <int CAUSAL>
__device__ __forceinline__ void online_softmax(float (&s)[64], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                               int key0, int Sk, int q0, int row0, int qd, float scale_log2) {
    if (key0 + 128 > Sk || (CAUSAL && key0 + 127 > q0)) {
#pragma unroll
        for (int j = 0; j < 16; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int key = key0 + 8 * j + 2 * qd + (e & 1), row = row0 + (e >> 1) * 8;
                if (key >= Sk || (CAUSAL && key > row)) s[4 * j + e] = NEG_INF;
            }
    }
    float base[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float mx = NEG_INF;
#pragma unroll
        for (int j = 0; j < 16; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
        mx = fmaxf(m[h], quad_max(mx) * scale_log2);
        base[h] = mx == NEG_INF ? 0.f : mx;  // a row with every key so far masked: 2^(-inf) = 0
        alpha[h] = ex2(m[h] - base[h]);
        m[h] = mx;
    }
    float rs[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < 64; ++i) {
        s[i] = ex2(fmaf(s[i], scale_log2, -base[(i >> 1) & 1]));
        rs[(i >> 1) & 1] += s[i];
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) l[h] = l[h] * alpha[h] + rs[h];
}
__device__ __forceinline__ void rescale_o(float (&o)[64], const float (&alpha)[2]) {
#pragma unroll
    for (int i = 0; i < 64; ++i) o[i] *= alpha[(i >> 1) & 1];
}
template <typename T> __device__ __forceinline__ void pack_p(unsigned (&pa)[8][4], const float (&s)[64]) {
#pragma unroll
    for (int kk = 0; kk < 8; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) pa[kk][r] = pack2(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1], T());
}

// -- the Hopper rungs' block: Q, the K/V stages, their mbarriers and copies ----------------------------------
// Q, K, V are (B*H*S, 128) 2-D tensor maps with 128 x 64 boxes (two boxes cover a row of D = 128); a block takes
// 128 query rows (q0 on, of head bh) and walks the keys in tiles of 128. Its shared memory, from the first
// 1024-byte boundary (the 128-byte swizzle's period): Q in 2 boxes; STAGES stages of K's two boxes, then V's;
// the mbarriers, [0] Q has landed, [1, STAGES] a stage has (`full`), [1 + STAGES, 2 STAGES] both warpgroups are
// done with a stage (`empty`, waited on when EMPTY), then a spare word. One thread issues every copy.
template <int STAGES, bool EMPTY> struct KVStages {
    static constexpr int STAGE = 4 * BOX;  // K halves, then V halves
    unsigned char* sQ;                     // 2 boxes
    unsigned char* sKV;                    // STAGES stages
    u64* bars;
    const void *qmap, *kmap, *vmap;
    int bh, Sq, Sk, q0;

    __device__ __forceinline__ unsigned char* tile(int t) const { return sKV + (t % STAGES) * STAGE; }  // V: + 2 BOX
    // K and V tile t into stage t % STAGES (rows past the tensor's end read as zeros)
    __device__ __forceinline__ void issue(int t) const {
        unsigned char* st = tile(t);
        u64* bar = &bars[1 + t % STAGES];
        mbar_expect_tx(bar, STAGE);
        const int row = bh * Sk + t * 128;
        tma_load(st, kmap, bar, 0, row);
        tma_load(st + BOX, kmap, bar, 64, row);
        tma_load(st + 2 * BOX, vmap, bar, 0, row);
        tma_load(st + 3 * BOX, vmap, bar, 64, row);
    }
    // Tile j >= STAGES reuses the stage of tile j - STAGES: wait until both warpgroups have released that one.
    __device__ __forceinline__ void refill(int j) const {
        if (EMPTY && j >= STAGES) mbar_wait(&bars[1 + STAGES + j % STAGES], (j / STAGES - 1) & 1);
        issue(j);  // (without EMPTY: the block barrier that ended tile j - STAGES freed the stage)
    }
    __device__ __forceinline__ void release(int t) const {  // this warpgroup's wgmmas are done with tile t's stage
        if (threadIdx.x % 128 == 0) mbar_arrive(&bars[1 + STAGES + t % STAGES]);
    }
    __device__ __forceinline__ void load_q() const {
        mbar_expect_tx(&bars[0], 2 * BOX);
        tma_load(sQ, qmap, &bars[0], 0, bh * Sq + q0);
        tma_load(sQ + BOX, qmap, &bars[0], 64, bh * Sq + q0);
    }
    __device__ __forceinline__ void wait_q() const { mbar_wait(&bars[0], 0); }
    __device__ __forceinline__ void wait(int t) const { mbar_wait(&bars[1 + t % STAGES], (t / STAGES) & 1); }
};
// The block's stages over its dynamic shared memory `raw`, their mbarriers initialised by thread 0 (the `empty`
// ones count one arrival per warpgroup) and published before any thread goes on.
template <int STAGES, bool EMPTY>
__device__ __forceinline__ KVStages<STAGES, EMPTY> kv_stages(unsigned char* raw, const void* qmap, const void* kmap,
                                                             const void* vmap, int bh, int Sq, int Sk, int q0) {
    KVStages<STAGES, EMPTY> kv;
    unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<size_t>(raw) + 1023) & ~size_t(1023));
    kv.sQ = smem;
    kv.sKV = smem + 2 * BOX;
    kv.bars = reinterpret_cast<u64*>(kv.sKV + STAGES * kv.STAGE);
    kv.qmap = qmap;
    kv.kmap = kmap;
    kv.vmap = vmap;
    kv.bh = bh;
    kv.Sq = Sq;
    kv.Sk = Sk;
    kv.q0 = q0;
    if (threadIdx.x == 0) {
        for (int i = 0; i <= STAGES; ++i) mbar_init(&kv.bars[i], 1);
        for (int i = 0; i < STAGES; ++i) mbar_init(&kv.bars[1 + STAGES + i], 2);  // one arrival per warpgroup
        fence_mbar_init();
    }
    __syncthreads();
    return kv;
}
// The copies before the first tile. PRODUCER = 1: the third warpgroup (threads 256-383) does nothing else: it
// hands its registers to the consumers (setmaxnreg: 40 a thread for it, 232 for them), its first thread issues Q
// and then every tile as its stage is released, and it returns false (the warpgroup leaves; no block-wide barrier
// may follow). PRODUCER = 0: thread 0 issues Q and the first AHEAD tiles, the rest between its own tiles.
template <int PRODUCER, int AHEAD, class KV>
__device__ __forceinline__ bool start_copies(const KV& kv, int n_tiles) {
    if (PRODUCER && threadIdx.x >= 256) {
        setmaxnreg_dec<40>();
        if (threadIdx.x == 256) {
            kv.load_q();
            for (int j = 0; j < n_tiles; ++j) kv.refill(j);
        }
        return false;
    }
    if (PRODUCER) setmaxnreg_inc<232>();
    if (!PRODUCER && threadIdx.x == 0) {
        kv.load_q();
        for (int t = 0; t < AHEAD && t < n_tiles; ++t) kv.issue(t);
    }
    return true;
}
// O = acc / l and lse = (m + log2 l) ln 2 for this thread's rows row0 and row0 + 8 of head bh (l is a thread's
// partial: reduced over the quad here; m is in units of scale * log2 e).
template <typename T>
__device__ __forceinline__ void store_o(const float (&o)[64], const float (&m)[2], const float (&l)[2], T* O,
                                        float* LSE, int bh, int Sq, int row0, int qd) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const float l_row = quad_sum(l[h]);
        const float inv = 1.f / l_row;
        const int row = row0 + 8 * h;
        if (row < Sq) {
            T* out = O + ((size_t)bh * Sq + row) * 128 + 2 * qd;
#pragma unroll
            for (int j = 0; j < 16; ++j)
                *reinterpret_cast<unsigned*>(out + 8 * j) = pack2(o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv, T());
            if (qd == 0) LSE[(size_t)bh * Sq + row] = (m[h] + __log2f(l_row)) * 0.6931471805599453f;
        }
    }
}
