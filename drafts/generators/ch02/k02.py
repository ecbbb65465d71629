# CUDA sources of chapter 02 (each is one %%cuda_kernel cell's body).
NAIVE = r'''
// Rung 1. One thread per output element, and threadIdx.x walks DOWN a column of C.
// Lanes of a warp share `col` and take 32 consecutive rows: each load of A touches 32 rows (32
// sectors, K*4 bytes apart) and each store to C 32 different rows. Only B[k][col] is a broadcast.
extern "C" __global__ void sgemm_naive(const float* __restrict__ A, const float* __restrict__ B,
                                       float* __restrict__ C, int M, int N, int K) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    const int col = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {  // the guard: M and N need not be multiples of 32
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
        C[(size_t)row * N + col] = acc;
    }
}
'''

COALESCED = r'''
// Rung 2. The same arithmetic; only the map from threads to outputs changes: threadIdx.x now walks
// ALONG a row of C. A warp reads one A element (broadcast) and 32 consecutive B elements (one 128-byte
// line), and writes 32 consecutive C elements (one line).
extern "C" __global__ void sgemm_coalesced(const float* __restrict__ A, const float* __restrict__ B,
                                           float* __restrict__ C, int M, int N, int K) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
        C[(size_t)row * N + col] = acc;
    }
}
'''

SMEM = r'''
// Rung 3. A 32x32 block stages a 32x32 tile of A and of B in shared memory, and every element it
// brings from global memory is used 32 times from there instead of once.
constexpr int TILE = 32;

extern "C" __global__ void sgemm_smem(const float* __restrict__ A, const float* __restrict__ B,
                                      float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // Out-of-range elements load as 0, which adds nothing to the dot product: the tail of K is free.
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();  // RAW: nobody reads the tile before every thread has written its element
        #pragma unroll
        for (int kk = 0; kk < TILE; ++kk) acc += As[ty][kk] * Bs[kk][tx];  // As: broadcast; Bs: 32 banks
        __syncthreads();  // WAR: nobody overwrites the tile while a slower warp still reads it
    }
    if (row < M && col < N) C[(size_t)row * N + col] = acc;
}
'''

BLOCKTILE_1D = r'''
// Rung 4. Each thread computes a column of TM = 8 outputs. The B element it reads from shared memory
// is reused 8 times from a register, so shared-memory loads per FMA drop from 2 to 9/8.
constexpr int BM = 64, BN = 64, BK = 8, TM = 8;  // 64x64 tile, 512 threads

extern "C" __global__ void __launch_bounds__(BM * BN / TM)
sgemm_blocktile_1d(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                   int M, int N, int K) {
    __shared__ float As[BM * BK];
    __shared__ float Bs[BK * BN];
    const int tid = threadIdx.x;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int thread_col = tid % BN, thread_row = tid / BN;     // a warp shares thread_row: As reads broadcast
    const int a_row = tid / BK, a_col = tid % BK;               // 512 threads load the 64x8 A tile ...
    const int b_row = tid / BN, b_col = tid % BN;               // ... and the 8x64 B tile, one element each
    float acc[TM] = {0.0f};
    for (int k0 = 0; k0 < K; k0 += BK) {
        As[a_row * BK + a_col] = (bm + a_row < M && k0 + a_col < K) ? A[(size_t)(bm + a_row) * K + k0 + a_col] : 0.0f;
        Bs[b_row * BN + b_col] = (k0 + b_row < K && bn + b_col < N) ? B[(size_t)(k0 + b_row) * N + bn + b_col] : 0.0f;
        __syncthreads();  // RAW on the tiles
        #pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float b = Bs[k * BN + thread_col];  // one shared load, TM uses
            #pragma unroll
            for (int i = 0; i < TM; ++i) acc[i] += As[(thread_row * TM + i) * BK + k] * b;
        }
        __syncthreads();  // WAR before the next tile overwrites As/Bs
    }
    const int col = bn + thread_col;
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = bm + thread_row * TM + i;
        if (row < M && col < N) C[(size_t)row * N + col] = acc[i];
    }
}
'''

BLOCKTILE_2D = r'''
// Rung 5. Each thread computes an 8x8 register tile: per k it loads 8 values of A and 8 of B from
// shared memory and does 64 FMAs with them (an outer product), 16 loads per 64 FMAs instead of 9 per 8.
constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
constexpr int THREADS = (BM / TM) * (BN / TN);  // 256

extern "C" __global__ void __launch_bounds__(THREADS)
sgemm_blocktile_2d(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                   int M, int N, int K) {
    __shared__ float As[BM * BK];
    __shared__ float Bs[BK * BN];
    const int tid = threadIdx.x;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int thread_col = tid % (BN / TN), thread_row = tid / (BN / TN);
    float acc[TM][TN] = {};
    float a[TM], b[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
        // 1024 elements of each tile, 4 per thread; consecutive threads take consecutive columns.
        #pragma unroll
        for (int i = 0; i < BM * BK / THREADS; ++i) {
            const int idx = tid + i * THREADS, r = idx / BK, c = idx % BK;
            As[r * BK + c] = (bm + r < M && k0 + c < K) ? A[(size_t)(bm + r) * K + k0 + c] : 0.0f;
        }
        #pragma unroll
        for (int i = 0; i < BK * BN / THREADS; ++i) {
            const int idx = tid + i * THREADS, r = idx / BN, c = idx % BN;
            Bs[r * BN + c] = (k0 + r < K && bn + c < N) ? B[(size_t)(k0 + r) * N + bn + c] : 0.0f;
        }
        __syncthreads();  // RAW on the tiles
        #pragma unroll
        for (int k = 0; k < BK; ++k) {
            #pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[(thread_row * TM + i) * BK + k];
            #pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k * BN + thread_col * TN + j];
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();  // WAR before the next tile
    }
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = bm + thread_row * TM + i;
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int col = bn + thread_col * TN + j;
            if (row < M && col < N) C[(size_t)row * N + col] = acc[i][j];
        }
    }
}
'''

VECTORIZED = r'''
// Rung 6. The same 128x128 tile and 8x8 register tile, with 16-byte accesses everywhere:
// float4 global loads (LDG.128), A stored TRANSPOSED in shared memory (As[k][m]) so a thread's 8
// values of A for one k are contiguous, and both fragments read as two LDS.128 each.
constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
constexpr int THREADS = (BM / TM) * (BN / TN);  // 256

// Four consecutive elements of row `r` starting at column `c` of a rows x cols row-major matrix,
// zero outside it. One LDG.128 when the row stride keeps 16-byte alignment and all four are inside;
// otherwise (odd K or N, the ragged edge) four guarded scalar loads.
__device__ __forceinline__ float4 load4(const float* __restrict__ p, int r, int c, int rows, int cols, bool vec) {
    if (r >= rows) return make_float4(0.f, 0.f, 0.f, 0.f);
    const float* q = p + (size_t)r * cols + c;
    if (vec && c + 3 < cols) return *reinterpret_cast<const float4*>(q);
    return make_float4(c < cols ? q[0] : 0.f, c + 1 < cols ? q[1] : 0.f, c + 2 < cols ? q[2] : 0.f, c + 3 < cols ? q[3] : 0.f);
}

extern "C" __global__ void __launch_bounds__(THREADS)
sgemm_vectorized(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                 int M, int N, int K) {
    __shared__ __align__(16) float As[BK * BM];  // transposed: As[k * BM + m]
    __shared__ __align__(16) float Bs[BK * BN];
    const int tid = threadIdx.x;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int thread_col = tid % (BN / TN), thread_row = tid / (BN / TN);
    const bool vec_a = (K % 4) == 0, vec_b = (N % 4) == 0;  // uniform: row starts stay 16-byte aligned
    // 128x8 A tile = 256 float4, one per thread: row tid/2, columns (tid%2)*4..+3.
    const int a_row = tid / (BK / 4), a_col = (tid % (BK / 4)) * 4;
    // 8x128 B tile = 256 float4, one per thread: row tid/32, columns (tid%32)*4..+3.
    const int b_row = tid / (BN / 4), b_col = (tid % (BN / 4)) * 4;
    float acc[TM][TN] = {};
    float a[TM], b[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
        const float4 va = load4(A, bm + a_row, k0 + a_col, M, K, vec_a);
        As[(a_col + 0) * BM + a_row] = va.x;  // the transpose: four scalar stores
        As[(a_col + 1) * BM + a_row] = va.y;
        As[(a_col + 2) * BM + a_row] = va.z;
        As[(a_col + 3) * BM + a_row] = va.w;
        const float4 vb = (k0 + b_row < K) ? load4(B, k0 + b_row, bn + b_col, K, N, vec_b) : make_float4(0.f, 0.f, 0.f, 0.f);
        *reinterpret_cast<float4*>(&Bs[b_row * BN + b_col]) = vb;
        __syncthreads();  // RAW on the tiles
        #pragma unroll
        for (int k = 0; k < BK; ++k) {
            #pragma unroll
            for (int i = 0; i < TM; i += 4) *reinterpret_cast<float4*>(&a[i]) = *reinterpret_cast<const float4*>(&As[k * BM + thread_row * TM + i]);
            #pragma unroll
            for (int j = 0; j < TN; j += 4) *reinterpret_cast<float4*>(&b[j]) = *reinterpret_cast<const float4*>(&Bs[k * BN + thread_col * TN + j]);
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();  // WAR before the next tile
    }
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = bm + thread_row * TM + i;
        if (row >= M) continue;
        #pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const int col = bn + thread_col * TN + j;
            float* c = C + (size_t)row * N + col;
            if (vec_b && col + 3 < N) {
                *reinterpret_cast<float4*>(c) = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
            } else {
                #pragma unroll
                for (int jj = 0; jj < 4; ++jj) if (col + jj < N) c[jj] = acc[i][j + jj];
            }
        }
    }
}
'''

WARPTILE = r'''
// Rung 7. Warp tiling. Same 128x128x8 block tile and 64 outputs per thread, but each warp owns a
// 32x64 sub-tile, its 32 lanes arranged 4 (rows) x 8 (columns), and each thread's 8x8 outputs are a
// 2x2 grid of 4x4 pieces 16 rows / 32 columns apart. Every LDS.128 of a warp then reads 4 (A) or
// 8 (B) consecutive 16-byte chunks: one shared-memory wavefront, no bank conflict. The A tile is
// stored transposed with a 4-float pad so the transposing scalar stores do not conflict either.
constexpr int BM = 128, BN = 128, BK = 8;
constexpr int WM = 32, WN = 64;              // warp tile
constexpr int TM = 8, TN = 8;                // outputs per thread
constexpr int TR = WM / TM, TC = WN / TN;    // lanes along M and N in a warp: 4 x 8
constexpr int SUBM = WM / (TM / 4), SUBN = WN / (TN / 4);  // 16, 32: distance between a thread's 4x4 pieces
constexpr int THREADS = (BM / WM) * (BN / WN) * 32;        // 256
constexpr int LDA = BM + 4;                  // padded row of the transposed A tile
static_assert(TR * TC == 32, "a warp is 32 lanes");

__device__ __forceinline__ float4 load4(const float* __restrict__ p, int r, int c, int rows, int cols, bool vec) {
    if (r >= rows) return make_float4(0.f, 0.f, 0.f, 0.f);
    const float* q = p + (size_t)r * cols + c;
    if (vec && c + 3 < cols) return *reinterpret_cast<const float4*>(q);
    return make_float4(c < cols ? q[0] : 0.f, c + 1 < cols ? q[1] : 0.f, c + 2 < cols ? q[2] : 0.f, c + 3 < cols ? q[3] : 0.f);
}

extern "C" __global__ void __launch_bounds__(THREADS)
sgemm_warptile(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
               int M, int N, int K) {
    __shared__ __align__(16) float As[BK * LDA];
    __shared__ __align__(16) float Bs[BK * BN];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int wm = (warp / (BN / WN)) * WM, wn = (warp % (BN / WN)) * WN;  // this warp's sub-tile
    const int tr = lane / TC, tc = lane % TC;                              // this lane in it
    const bool vec_a = (K % 4) == 0, vec_b = (N % 4) == 0;
    const int a_row = tid / (BK / 4), a_col = (tid % (BK / 4)) * 4;
    const int b_row = tid / (BN / 4), b_col = (tid % (BN / 4)) * 4;
    float acc[TM][TN] = {};
    float a[TM], b[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
        const float4 va = load4(A, bm + a_row, k0 + a_col, M, K, vec_a);
        As[(a_col + 0) * LDA + a_row] = va.x;
        As[(a_col + 1) * LDA + a_row] = va.y;
        As[(a_col + 2) * LDA + a_row] = va.z;
        As[(a_col + 3) * LDA + a_row] = va.w;
        const float4 vb = (k0 + b_row < K) ? load4(B, k0 + b_row, bn + b_col, K, N, vec_b) : make_float4(0.f, 0.f, 0.f, 0.f);
        *reinterpret_cast<float4*>(&Bs[b_row * BN + b_col]) = vb;
        __syncthreads();  // RAW on the tiles
        #pragma unroll
        for (int k = 0; k < BK; ++k) {
            #pragma unroll
            for (int i = 0; i < TM / 4; ++i)
                *reinterpret_cast<float4*>(&a[4 * i]) = *reinterpret_cast<const float4*>(&As[k * LDA + wm + i * SUBM + tr * 4]);
            #pragma unroll
            for (int j = 0; j < TN / 4; ++j)
                *reinterpret_cast<float4*>(&b[4 * j]) = *reinterpret_cast<const float4*>(&Bs[k * BN + wn + j * SUBN + tc * 4]);
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();  // WAR before the next tile
    }
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = bm + wm + (i / 4) * SUBM + tr * 4 + i % 4;
        if (row >= M) continue;
        #pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const int col = bn + wn + (j / 4) * SUBN + tc * 4;
            float* c = C + (size_t)row * N + col;
            if (vec_b && col + 3 < N) {
                *reinterpret_cast<float4*>(c) = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
            } else {
                #pragma unroll
                for (int jj = 0; jj < 4; ++jj) if (col + jj < N) c[jj] = acc[i][j + jj];
            }
        }
    }
}
'''

ASYNC = r'''
// Rung 8. A multi-stage cp.async pipeline, and the tile shape as template parameters for the autotuner.
// While the warps multiply tile t out of shared memory, the copy engine of each SM is already moving
// tiles t+1 .. t+STAGES-1 from global memory into the other buffers: no thread waits for a load, and
// no register is spent staging one. The warp tiling of rung 7 is kept (2x2 or 4x2 pieces of 4x4 per
// thread, conflict-free LDS.128), and the fragments of step k+1 are loaded while step k's FMAs run.

// cp.async: global -> shared without a register. `src_size` 0 writes zeros and reads nothing,
// which is how the ragged edges of M, N and K are filled without a branch around the copy.
__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool pred) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(s), "l"(src), "r"(pred ? 4 : 0));
}
__device__ __forceinline__ void cp_async16(float* dst, const float* src, bool pred) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(s), "l"(src), "r"(pred ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

template <int BM, int BN, int BK, int WM, int WN, int TM, int TN>
struct Tiling {
    static constexpr int THREADS = (BM / WM) * (BN / WN) * 32;
    static constexpr int TR = WM / TM, TC = WN / TN;                   // lanes along M, N in a warp
    static constexpr int SUBM = 4 * TR, SUBN = 4 * TC;                 // stride between a thread's 4x4 pieces
    static constexpr int LDA = BM + 4;                                 // transposed A row, padded: conflict-free stores
    static constexpr int STAGE_FLOATS = BK * (LDA + BN);
    static constexpr int A_COPIES = BM * BK / THREADS, A_ROW_STEP = THREADS / BK;          // 4-byte copies of A
    static constexpr int B_COPIES = BK * BN / (4 * THREADS), B_ROW_STEP = THREADS / (BN / 4);  // 16-byte copies of B
    // Two blocks per SM when their registers fit (64K per SM), else one with up to 255 registers.
    static constexpr int MIN_BLOCKS = THREADS * (TM * TN + 64) <= 32768 ? 2 : 1;
    static_assert(TR * TC == 32, "the warp tile must hold 32 lanes of TM x TN outputs");
    static_assert(TM % 4 == 0 && TN % 4 == 0, "outputs per thread come in 4x4 pieces");
    static_assert(THREADS % BK == 0 && THREADS % (BN / 4) == 0 && A_COPIES >= 1 && B_COPIES >= 1 && A_COPIES <= 32,
                  "each thread copies whole columns of the A tile and whole 16-byte columns of the B tile");
};

template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int STAGES>
__global__ void __launch_bounds__(Tiling<BM, BN, BK, WM, WN, TM, TN>::THREADS, Tiling<BM, BN, BK, WM, WN, TM, TN>::MIN_BLOCKS)
sgemm_async(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
    using T = Tiling<BM, BN, BK, WM, WN, TM, TN>;
    constexpr int THREADS = T::THREADS, LDA = T::LDA;
    extern __shared__ __align__(16) float smem[];  // STAGES x [ As: BK x LDA (transposed) | Bs: BK x BN ]
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

    // Grouped rasterization: consecutive blocks walk down 8 block-rows before moving right, so the
    // blocks resident at one time share A panels and B panels in the L2.
    constexpr int GROUP = 8;
    const int grid_m = gridDim.y, grid_n = gridDim.x, bid = blockIdx.y * grid_n + blockIdx.x;
    const int first_m = (bid / (GROUP * grid_n)) * GROUP, rows = min(grid_m - first_m, GROUP);
    const int bm = (first_m + (bid % (GROUP * grid_n)) % rows) * BM;
    const int bn = ((bid % (GROUP * grid_n)) / rows) * BN;

    const int wm = (warp / (BN / WN)) * WM, wn = (warp % (BN / WN)) * WN;
    const int tr = lane / T::TC, tc = lane % T::TC;

    // Everything about the copies that does not change along K is computed once, here: a thread
    // copies column a_k of rows a_m + i*A_ROW_STEP of the A tile, and the 16-byte column b_n of
    // rows b_k + i*B_ROW_STEP of the B tile. The loop only advances two pointers.
    const int a_k = tid % BK, a_m = tid / BK;
    const int b_n = (tid % (BN / 4)) * 4, b_k = tid / (BN / 4);
    const float* a_src = A + (size_t)min(bm + a_m, M - 1) * K + a_k;
    const float* b_src = B + (size_t)b_k * N + bn + b_n;
    const size_t a_step = (size_t)T::A_ROW_STEP * K, b_step = (size_t)T::B_ROW_STEP * N;
    unsigned a_rows_ok = 0;
    #pragma unroll
    for (int i = 0; i < T::A_COPIES; ++i) a_rows_ok |= (bm + a_m + i * T::A_ROW_STEP < M ? 1u : 0u) << i;
    // 16-byte copies of B need every row start 16-byte aligned: N % 4 == 0 (and an aligned base).
    const bool vec_b = (N % 4) == 0 && (reinterpret_cast<size_t>(B) % 16) == 0;
    const int KT = (K + BK - 1) / BK;

    auto load_tile = [&](int kt, int stage) {  // called for kt = 0, 1, 2, ... in order
        float* As = smem + stage * T::STAGE_FLOATS;
        float* Bs = As + BK * LDA;
        const int k0 = kt * BK;
        // A: 4-byte copies, transposed on the way in. Lanes take consecutive k (one 32-byte sector
        // of a row per 8 lanes) and store to As[k][m]: with LDA = BM + 4 the 32 stores hit 32 banks.
        const bool a_k_ok = k0 + a_k < K;
        #pragma unroll
        for (int i = 0; i < T::A_COPIES; ++i) {
            const bool ok = a_k_ok && ((a_rows_ok >> i) & 1u);
            cp_async4(&As[a_k * LDA + a_m + i * T::A_ROW_STEP], ok ? a_src + i * a_step : A, ok);
        }
        a_src += BK;
        // B: 16-byte copies (cp.async.cg, through L2 only) when rows are aligned, else 4-byte ones.
        #pragma unroll
        for (int i = 0; i < T::B_COPIES; ++i) {
            const int gk = k0 + b_k + i * T::B_ROW_STEP;
            float* dst = &Bs[(b_k + i * T::B_ROW_STEP) * BN + b_n];
            const float* src = b_src + i * b_step;
            if (vec_b) {
                const bool ok = gk < K && bn + b_n < N;  // N % 4 == 0: a chunk is all in or all out
                cp_async16(dst, ok ? src : B, ok);
            } else {
                #pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const bool ok = gk < K && bn + b_n + j < N;
                    cp_async4(dst + j, ok ? src + j : B, ok);
                }
            }
        }
        b_src += (size_t)BK * N;
    };

    // Prologue: put STAGES-1 tiles in flight. Every iteration commits exactly one group (possibly
    // empty), so "group g holds tile g" and the wait below can count.
    #pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT) load_tile(s, s);
        cp_async_commit();
    }

    float acc[TM][TN] = {};
    float a[2][TM], b[2][TN];  // fragments, double-buffered in registers
    for (int kt = 0; kt < KT; ++kt) {
        cp_async_wait<STAGES - 2>();  // this thread's copies of tile kt have landed ...
        __syncthreads();              // ... and everyone's; and everyone is done reading tile kt-1,
                                      // whose buffer the next line refills (WAR).
        if (kt + STAGES - 1 < KT) load_tile(kt + STAGES - 1, (kt + STAGES - 1) % STAGES);
        cp_async_commit();

        const float* As = smem + (kt % STAGES) * T::STAGE_FLOATS;
        const float* Bs = As + BK * LDA;
        auto load_frag = [&](int k, int buf) {
            #pragma unroll
            for (int i = 0; i < TM / 4; ++i)
                *reinterpret_cast<float4*>(&a[buf][4 * i]) = *reinterpret_cast<const float4*>(&As[k * LDA + wm + i * T::SUBM + tr * 4]);
            #pragma unroll
            for (int j = 0; j < TN / 4; ++j)
                *reinterpret_cast<float4*>(&b[buf][4 * j]) = *reinterpret_cast<const float4*>(&Bs[k * BN + wn + j * T::SUBN + tc * 4]);
        };
        load_frag(0, 0);
        #pragma unroll
        for (int k = 0; k < BK; ++k) {
            if (k + 1 < BK) load_frag(k + 1, (k + 1) % 2);  // in flight while the FMAs below run
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[k % 2][i], b[k % 2][j], acc[i][j]);
        }
    }
    cp_async_wait<0>();  // no copy may outlive the block (only empty groups are left, but say so)

    const bool vec_c = (N % 4) == 0 && (reinterpret_cast<size_t>(C) % 16) == 0;
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = bm + wm + (i / 4) * T::SUBM + tr * 4 + i % 4;
        if (row >= M) continue;
        #pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const int col = bn + wn + (j / 4) * T::SUBN + tc * 4;
            float* c = C + (size_t)row * N + col;
            if (vec_c && col < N) {
                *reinterpret_cast<float4*>(c) = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
            } else {
                #pragma unroll
                for (int jj = 0; jj < 4; ++jj) if (col + jj < N) c[jj] = acc[i][j + jj];
            }
        }
    }
}
'''

# (BM, BN, BK, WM, WN, TM, TN, STAGES)
CONFIGS = [
    (128, 128, 8, 32, 64, 8, 8, 3),
    (128, 256, 16, 64, 64, 16, 8, 3),
    (128, 256, 32, 64, 64, 16, 8, 3),
    (256, 128, 16, 64, 64, 16, 8, 3),
    (64, 128, 16, 32, 64, 8, 8, 3),
    (64, 128, 16, 32, 64, 8, 8, 4),
    (64, 128, 32, 32, 64, 8, 8, 3),
    (64, 128, 32, 32, 64, 8, 8, 4),
    (128, 64, 16, 64, 32, 8, 8, 3),
    (128, 64, 32, 64, 32, 8, 8, 3),
    (64, 256, 16, 32, 64, 8, 8, 3),
    (64, 256, 16, 64, 64, 16, 8, 3),
    (128, 128, 16, 64, 64, 16, 8, 4),
    (128, 128, 32, 64, 64, 16, 8, 3),
]
