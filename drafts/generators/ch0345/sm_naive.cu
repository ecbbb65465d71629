#include <cuda_bf16.h>
#define NEG_INF __int_as_float(0xff800000)  // -inf (NVRTC has no math.h)
__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16(v); }

constexpr int NAIVE_THREADS = 256;  // the tree reductions below assume exactly this block size

// Three passes over the row, one block per row, scalar loads: the textbook softmax.
// Pass 1 reads the row for its max, pass 2 reads it again for sum(exp(x - max)), pass 3 reads it a
// third time and writes. Logical traffic: 3 reads + 1 write per element.
template <typename T>
__global__ void softmax_naive(const T* __restrict__ x, T* __restrict__ out, int cols) {
    __shared__ float red[NAIVE_THREADS];
    const int tid = threadIdx.x;
    const T* p = x + (size_t)blockIdx.x * cols;
    T* q = out + (size_t)blockIdx.x * cols;

    float m = NEG_INF;
    for (int i = tid; i < cols; i += NAIVE_THREADS) m = fmaxf(m, to_f(p[i]));
    red[tid] = m;
    __syncthreads();
    for (int s = NAIVE_THREADS / 2; s > 0; s >>= 1) {  // log2(256) = 8 barriers
        if (tid < s) red[tid] = fmaxf(red[tid], red[tid + s]);
        __syncthreads();  // every partial of this level is written before the next level reads it
    }
    m = red[0];
    __syncthreads();  // everyone has read red[0] before the sum reuses the array

    // A fully masked row has m = -inf: exp(-inf - -inf) = NaN, so the row comes out NaN, as in torch.
    float sum = 0.f;
    for (int i = tid; i < cols; i += NAIVE_THREADS) sum += expf(to_f(p[i]) - m);
    red[tid] = sum;
    __syncthreads();
    for (int s = NAIVE_THREADS / 2; s > 0; s >>= 1) {
        if (tid < s) red[tid] += red[tid + s];
        __syncthreads();
    }
    const float inv = 1.f / red[0];
    for (int i = tid; i < cols; i += NAIVE_THREADS) q[i] = from_f<T>(expf(to_f(p[i]) - m) * inv);
}
