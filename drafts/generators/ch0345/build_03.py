import sys
HERE = __import__('os').path.dirname(__import__('os').path.abspath(__file__))
sys.path.insert(0, HERE)
from nbgen import new_nb, md, code, cuda, save, cu, BAK

nb = new_nb()
md(nb, r'''
# 03 · Online softmax: one read, one write, any row length

$y_{ij} = e^{x_{ij} - m_i} / \sum_k e^{x_{ik} - m_i}$ over the last dimension of a `rows × cols` matrix,
with $m_i = \max_k x_{ik}$ subtracted so that nothing overflows (without it, $e^{89}$ is already `inf`
in fp32). Softmax is the second most common kernel of LLM inference (attention scores, sampling), and
it is purely memory-bound: a handful of operations per element against 8 bytes moved in fp32. Its
difficulty is the dependency: every output needs the max and the sum of its whole row, so the obvious
kernel reads the row three times.

**The race.** The baseline is `torch.softmax(x, -1)` (eager). Against it, one idea per rung:

| variant | the one idea |
|---|---|
| `cuda_naive` | three passes (max, sum, write), one block per row, scalar loads, shared-memory tree reductions |
| `cuda_online` | two passes: the running max and sum $(m, d)$ in one read, merged across threads by the **merge rule**; warp shuffles |
| `cuda_vec` | the same, with 16-byte loads and stores (`uint4`: 4 floats or 8 bf16), scalar head and tail for unaligned rows |
| `cuda_warp` | one row per **warp**, not per block: no shared memory, no barrier; made for short rows |
| `cuda_smem` | the row's slice staged in **shared memory** during the first pass, so DRAM sees one read; long rows split over a **thread-block cluster** whose blocks merge $(m, d)$ through distributed shared memory |
| `triton` | the whole row in registers when it fits (≤ 16384 columns), else the two-pass online loop |
| `pallas` | the two-pass online loop in JAX Pallas (lowered through Triton on a GPU) |

Every variant runs in fp32 and in bf16 (bf16 in and out, fp32 arithmetic): two races, one per dtype.
''')
code(nb, 'size = "full"  # papermill parameter: "quick" for a smoke run, "full" for the book\'s numbers', tags=['parameters'])
code(nb, r'''
%load_ext labmagic
import functools
import math
import warnings

import torch
import triton
import triton.language as tl
import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

import labmagic
from labmagic.pallas import to_jax, to_torch

device = labmagic.torch_device()
print(f"device: {device}, GPU: {labmagic.runtime.gpu_name() or 'none'}, compile target: {labmagic.target_arch()}")
''')
md(nb, r'''
## The online merge rule

Keep, for the elements seen so far, the max $m$ and $d = \sum e^{x - m}$. Two such states combine as

$$M = \max(m_a, m_b), \qquad d = d_a\, e^{m_a - M} + d_b\, e^{m_b - M},$$

which is exact, associative and commutative (Milakov and Gimelshein, *Online normalizer calculation
for softmax*, 2018). So one read of the row gives both statistics: each thread folds its elements in
as it loads them, then threads, warps, blocks and clusters merge their states in any order. The
second pass only writes $e^{x - M} / d$. The three-pass kernel needed the max before it could start
the sum; the online one does not.

Two details decide whether the numerics match torch:

- **Masked elements** ($-\infty$, as attention masks produce) contribute $e^{-\infty} = 0$. But an
  *empty* state ($m = -\infty$, $d = 0$) merged with another empty one computes
  $0 \cdot e^{-\infty + \infty} = 0 \cdot \text{NaN}$: a row whose first elements are all masked would
  turn to NaN. The kernels guard the rescale: $e^{a - M}$ is 0 when $a = -\infty$.
- **A fully masked row** has no meaningful softmax; torch returns NaN for it (it computes
  $e^{-\infty - (-\infty)}$). We match that on purpose rather than returning zeros: a different value
  would be a silent disagreement with the reference. With the guard the end state is $(-\infty, 0)$
  and the output $0/0$ is NaN.
''')
md(nb, r'''
## Bytes, flops and the roofline, before measuring

Per element, the minimum is one read and one write: $2 \cdot s$ bytes with $s$ = 4 (fp32) or 2 (bf16),
and about 5 flops (max, subtract, exp, add, multiply). Arithmetic intensity $5/8$ (fp32) or $5/4$
(bf16) flop/byte, two orders of magnitude below the H200's ridge point: memory-bound, and the exps
are not the limit either (two `MUFU.EX2` per element at ~4 T/s across 132 SMs take ~0.14 ms at
32768×8192, against the 0.5 ms floor in fp32).

The race counts **logical bytes**, $2 \cdot s \cdot \text{rows} \cdot \text{cols}$ (each input read
once, each output written once), so a kernel that reads the row three times from DRAM shows it as lost
bandwidth. What each variant asks for, and what DRAM actually serves:

| variant | requests to L2 per element | DRAM traffic per element (expected) |
|---|---|---|
| `cuda_naive` | 3 reads + 1 write | 1 read + 1 write while a block's row stays in L2, up to 3 + 1 when it does not |
| `cuda_online`, `cuda_vec`, `cuda_warp`, `triton` (long rows), `pallas` | 2 reads + 1 write | 1 + 1 while the row stays in L2, 2 + 1 when not |
| `cuda_smem`, `triton` (short rows) | 1 read + 1 write | 1 + 1 always (the second look is in shared memory or registers) |

**When does the second read hit L2?** A block reads its row and, a few microseconds later, reads it
again. In between, every other resident block has streamed its own row through L2 as well, so the
reuse distance is roughly (resident blocks) × (row bytes). With one row per block and, say, 4 to 8
blocks per SM: 32768×8192 in fp32 is a 32 KB row, $132 \times 8 \times 32$ KB ≈ 34 MB, inside the
60 MB L2 (barely, and the H200's L2 is two 30 MB halves); at 262144 columns the row is 1 MB and even one
block per SM puts 132 MB between the two reads, so the second pass goes to DRAM and the two-pass
kernels move 2 reads + 1 write per element: 1.5 × the logical bytes, a third of the bandwidth lost. `cuda_smem` removes the question: the
slice of the row a block owns sits in its shared memory (at most 64 KB per block here, a cluster of up
to 8 blocks per row for longer rows; 128 KB per block at 262144 fp32 columns).

**The sweep** keeps rows × cols = $2^{28}$ (1 GiB in fp32, 512 MiB in bf16: many times the L2) and moves
the row length from 1024 to 262144. The floor at the measured copy bandwidth (~4.3 TB/s counting read +
write) is $2^{28} \cdot 8 / 4.3$ TB/s = **0.50 ms** in fp32 and **0.25 ms** in bf16, at every row length.

**Predictions, written down before the run:**

- At 32768×8192 `cuda_smem` and `triton` (row in registers) reach 85-90% of the copy bandwidth in both
  dtypes; `cuda_vec` and `cuda_warp` within ~10% of them if the second read hits L2 as argued.
  torch eager is reported at about 2.0 TB/s (fp32) and 1.1 TB/s (bf16) on this shape, so the target of
  1.5× (fp32) and 2.5× (bf16) over torch means ≥ 3.0 and ≥ 2.75 TB/s.
- `cuda_naive` is behind: 3 requests per element through L2, 16 barriers per row, 4-byte (fp32) or
  2-byte (bf16) loads; expect 50-70% of the copy.
- `cuda_online` (scalar) sits between: bf16 suffers most from 2-byte loads (twice the instructions per
  byte).
- **Short rows** (1024 columns, 4 KB in fp32): one block per row spends its time in barriers and block
  scheduling; `cuda_warp` should win there. **Long rows** (≥ 65536): `cuda_warp` collapses (one warp
  cannot keep enough bytes in flight, and there are only 4096..1024 rows), the two-pass kernels lose
  up to a third when their second read misses L2, and `cuda_smem` should stay flat thanks to clusters.
- `pallas` follows the two-pass Triton loop, plus JAX's fixed dispatch cost per call.
''')
md(nb, r'''
## The CUDA variants

Each `%%cuda_kernel` cell compiles with NVRTC (for this GPU, or for `sm_90` without one) and prints the
registers, shared memory, stack and spills of every kernel. The kernels are templates over the
storage type, instantiated for `float` and `__nv_bfloat16`. **No variant may spill**: the row is never
held in registers whole (only the shared-memory rung keeps it on chip, and it sizes its clusters so
that it fits).

### Rung 1: three passes
''')
cuda(nb, cu(HERE + '/sm_naive.cu'), "-n 'softmax_naive<float>' -n 'softmax_naive<__nv_bfloat16>'")
md(nb, r'''
### Rungs 2-4: the online state, warp shuffles, 16-byte vectors, a row per warp

One cell, because the rungs share their parts: the $(m, d)$ state and its merge, the butterfly
`__shfl_xor_sync` reduction (5 shuffles and every lane holds the warp's state), the block reduction on
top of it (2 barriers instead of the naive kernel's 16), and the 16-byte load path. A row starts at
element `row * cols`; unless `cols` is a multiple of the vector width that address is not 16-byte
aligned, so each row splits into a scalar head (to the first 16-byte boundary), whole vectors, and a
scalar tail.''' + ('' if BAK else r''' The vectors are visited in batches of four whose loads are all issued before any is
used (`batched`): written as a plain loop, the compiler keeps one 16-byte load in flight per thread,
and one is not enough to cover DRAM latency (Little's law: ~4.3 TB/s × ~0.7 µs ≈ 3 MB in flight
across the GPU, ~23 KB per SM, so ~64 bytes per thread at 384 resident threads and more at fewer).'''))
cuda(nb, cu(HERE + '/sm_online.cu'), "-n 'softmax_online<float>' -n 'softmax_online<__nv_bfloat16>' -n 'softmax_vec<float>' -n 'softmax_vec<__nv_bfloat16>' -n 'softmax_warp<float>' -n 'softmax_warp<__nv_bfloat16>'")
md(nb, r'''
### Rung 5: the row in shared memory, long rows over a cluster

Hopper groups up to 8 blocks (portably) into a **cluster** scheduled together on one GPC; a block can
read its peers' shared memory (`cluster.map_shared_rank`). The cluster size is a compile-time
attribute (`__cluster_dims__`), so each size is its own instance, and the launcher picks the smallest
cluster whose slices fit in 64 KB of shared memory per block.
''')
cuda(nb, cu(HERE + '/sm_cluster.cu'), "-n 'softmax_smem<float>' -n 'softmax_smem<__nv_bfloat16>' -n 'softmax_cluster<float, 2>' -n 'softmax_cluster<float, 4>' -n 'softmax_cluster<float, 8>' -n 'softmax_cluster<__nv_bfloat16, 2>' -n 'softmax_cluster<__nv_bfloat16, 4>' -n 'softmax_cluster<__nv_bfloat16, 8>'")
md(nb, r'''
The launchers give every variant the same signature, `variant(x, out=None) -> y`, so the correctness
check and the race treat them alike; `out` lets the check hand in a poisoned buffer. Each picks the
kernel instance by dtype.
''')
code(nb, r'''
def _out(x, out):
    y = torch.empty_like(x) if out is None else out
    # The vector paths assume x and y start on 16-byte boundaries (torch's allocations are 256-byte aligned).
    assert x.data_ptr() % 16 == 0 and y.data_ptr() % 16 == 0, "16-byte aligned tensors expected"
    return y

def _pick(x, for_fp32, for_bf16):
    return {torch.float32: for_fp32, torch.bfloat16: for_bf16}[x.dtype]

def cuda_naive(x, out=None):
    y, (rows, cols) = _out(x, out), x.shape
    _pick(x, softmax_naive_float, softmax_naive_nv_bfloat16)(x, y, cols, grid=rows, block=256)
    return y

BLOCK_THREADS = 256

def cuda_online(x, out=None):
    y, (rows, cols) = _out(x, out), x.shape
    _pick(x, softmax_online_float, softmax_online_nv_bfloat16)(x, y, cols, grid=rows, block=BLOCK_THREADS)
    return y

def cuda_vec(x, out=None):
    y, (rows, cols) = _out(x, out), x.shape
    _pick(x, softmax_vec_float, softmax_vec_nv_bfloat16)(x, y, cols, grid=rows, block=BLOCK_THREADS)
    return y

WARPS_PER_BLOCK = 8

def cuda_warp(x, out=None):
    y, (rows, cols) = _out(x, out), x.shape
    _pick(x, softmax_warp_float, softmax_warp_nv_bfloat16)(
        x, y, rows, cols, grid=triton.cdiv(rows, WARPS_PER_BLOCK), block=32 * WARPS_PER_BLOCK)
    return y

SLICE_BYTES = 64 * 1024  # shared memory per block before the row is split over a bigger cluster
SMEM_KERNELS = {
    (torch.float32, 1): softmax_smem_float, (torch.bfloat16, 1): softmax_smem_nv_bfloat16,
    (torch.float32, 2): softmax_cluster_float_2, (torch.bfloat16, 2): softmax_cluster_nv_bfloat16_2,
    (torch.float32, 4): softmax_cluster_float_4, (torch.bfloat16, 4): softmax_cluster_nv_bfloat16_4,
    (torch.float32, 8): softmax_cluster_float_8, (torch.bfloat16, 8): softmax_cluster_nv_bfloat16_8,
}

def smem_plan(cols, elsize):
    """(cluster size, shared bytes per block, threads per block) for one row of `cols` elements."""
    nvec = cols // (16 // elsize)  # 16-byte vectors in the row (at most; the head may take one)
    cl = 1
    while cl < 8 and cols * elsize > cl * SLICE_BYTES:
        cl *= 2
    per = triton.cdiv(nvec, cl)  # vectors per block
    threads = min(1024, max(64, triton.next_power_of_2(triton.cdiv(per, 8))))  # ~8 vectors per thread
    return cl, per * 16, threads

def cuda_smem(x, out=None):
    y, (rows, cols) = _out(x, out), x.shape
    cl, smem, threads = smem_plan(cols, x.element_size())
    SMEM_KERNELS[x.dtype, cl](x, y, cols, grid=rows * cl, block=threads, smem=smem)
    return y

def torch_softmax(x, out=None):
    return torch.softmax(x, -1, out=out) if out is not None else torch.softmax(x, -1)

for cols in (1024, 8192, 65536, 262144):
    for dt, s in (("fp32", 4), ("bf16", 2)):
        cl, smem, threads = smem_plan(cols, s)
        print(f"cuda_smem plan, {dt} x {cols:>6} cols: cluster of {cl}, {smem // 1024:>3} KB shared and {threads:>4} threads per block")
''')
md(nb, r'''
## Triton and Pallas

**Triton** gets two kernels and a dispatch on the row length. Up to 16384 columns the whole row is one
block in registers (`BLOCK` = the next power of two, the padding masked to $-\infty$), so DRAM sees one
read; Triton spreads it over `num_warps` warps so that no thread holds more than 32 values. Longer rows
take the two-pass online loop, with the first read marked `evict_last` and the second `evict_first`: a
hint to L2 to keep the row until its re-read.

**Pallas** has one kernel, the online loop, written as the per-row body of JAX's own Pallas GPU norm
kernels: `pallas_call` on one row, `jax.vmap` over rows (vmap adds the grid dimension), masked
`plgpu.load` / `plgpu.store` for the ragged last chunk. On a CPU `labmagic.pallas_call` runs it in
interpret mode, on a GPU natively, with no branch in this chapter.
''')
code(nb, r'''
TRITON_ROW_MAX = 16384  # columns held in registers at once; above this, the two-pass loop
TRITON_LOOP_BLOCK = 4096

@triton.jit
def softmax_row_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # rows * cols can pass 2**31
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))  # padding contributes exp(-inf) = 0; a fully masked row gives NaN, as torch
    tl.store(y_ptr + row * cols + offs, (e / tl.sum(e, 0)).to(y_ptr.dtype.element_ty), mask=mask)

@triton.jit
def softmax_loop_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row, y_row = x_ptr + row * cols, y_ptr + row * cols
    m = tl.full([BLOCK], -float("inf"), tl.float32)  # one (m, d) state per lane, merged at the end
    d = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < cols, other=-float("inf"), eviction_policy="evict_last").to(tl.float32)
        m_new = tl.maximum(m, x)
        # the merge rule's guard: exp(a - m_new) is 0 when a = -inf, so an all -inf lane stays (-inf, 0)
        # instead of NaN. Guard the inputs, not m_new: a NaN input must still reach d (tl.maximum drops NaN).
        d = d * tl.where(m == -float("inf"), 0.0, tl.exp(m - m_new)) + tl.where(x == -float("inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    m_row = tl.max(m, 0)
    d_row = tl.sum(d * tl.where(m == -float("inf"), 0.0, tl.exp(m - m_row)), 0)  # a NaN d survives
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < cols
        x = tl.load(x_row + offs, mask=mask, other=-float("inf"), eviction_policy="evict_first").to(tl.float32)
        tl.store(y_row + offs, (tl.exp(x - m_row) / d_row).to(y_ptr.dtype.element_ty), mask=mask)

def triton_softmax(x, out=None):
    y, (rows, cols) = _out(x, out), x.shape
    block = triton.next_power_of_2(cols)
    if block <= TRITON_ROW_MAX:
        softmax_row_kernel[(rows,)](x, y, cols, BLOCK=block, num_warps=min(16, max(1, block // 512)))
    else:
        softmax_loop_kernel[(rows,)](x, y, cols, BLOCK=TRITON_LOOP_BLOCK, num_warps=8)
    return y
''')
code(nb, r'''
NEG_INF = -float("inf")

def _pallas_softmax_row(x_ref, o_ref, *, block):
    n = x_ref.shape[0]
    chunks = pl.cdiv(n, block)

    def stats(i, state):  # pass 1: one (m, d) per lane, folded over the row's chunks
        m, d = state
        idx = i * block + jnp.arange(block)
        x = plgpu.load(x_ref.at[idx], mask=idx < n, other=NEG_INF, eviction_policy="evict_last").astype(jnp.float32)
        m_new = jnp.maximum(m, x)
        # as in Triton: guard the inputs (exp(-inf - m_new) = 0), never m_new, so that NaN propagates
        d = d * jnp.where(m == NEG_INF, 0.0, jnp.exp(m - m_new)) + jnp.where(x == NEG_INF, 0.0, jnp.exp(x - m_new))
        return m_new, d

    m, d = lax.fori_loop(0, chunks, stats, (jnp.full((block,), NEG_INF, jnp.float32), jnp.zeros((block,), jnp.float32)))
    m_row = m.max()
    d_row = (d * jnp.where(m == NEG_INF, 0.0, jnp.exp(m - m_row))).sum()

    @pl.loop(0, chunks)
    def _(i):  # pass 2: re-read (from L2, we hope) and write
        idx = i * block + jnp.arange(block)
        mask = idx < n
        x = plgpu.load(x_ref.at[idx], mask=mask, other=NEG_INF, eviction_policy="evict_first").astype(jnp.float32)
        plgpu.store(o_ref.at[idx], (jnp.exp(x - m_row) / d_row).astype(o_ref.dtype), mask=mask)

def _pallas_plan(cols):
    block = min(4096, max(128, pl.next_power_of_2(cols)))
    return block, min(8, max(1, block // 256))

@jax.jit
def pallas_softmax_jax(x):
    block, warps = _pallas_plan(x.shape[-1])
    row = labmagic.pallas_call(
        functools.partial(_pallas_softmax_row, block=block),
        out_shape=jax.ShapeDtypeStruct(x.shape[-1:], x.dtype), grid=(),
        compiler_params=plgpu.CompilerParams(num_warps=warps),
    )
    return jax.vmap(row)(x)  # vmap over rows becomes the grid

def pallas_softmax(x, out=None):
    y = to_torch(pallas_softmax_jax(to_jax(x)))
    if out is None:
        return y
    out.copy_(y)  # JAX allocates its own output; the copy is outside the race (which calls out=None)
    return out
''')
md(nb, r'''
## Correctness, on awkward shapes and awkward values

Every variant, on shapes that divide nothing (3×1, 7×1000, 33×4097 and, with a GPU, 5×262147: a
long row with a ragged tail and unaligned rows), with fresh random inputs and three planted rows:
row 0 scaled by 100 (its exponentials overflow fp32 unless the max is subtracted), row 1 with every
third element $-\infty$, row 2 **fully masked** (all $-\infty$: torch returns NaN there, and so must
we). The output buffer is poisoned with $+\infty$ first (a softmax is never $+\infty$, and NaN would
hide an unwritten masked row). Each output must match torch on the same device, NaN for NaN; the
error column is against a float64 softmax of the same input. Tolerances: fp32 `rtol=1e-4` (room for
`__expf` and a different summation order), bf16 `rtol=1.6e-2` (one bf16 rounding of the output may
land on the other side of a tie: ≤ 1 ulp $= 2^{-7}$ relative), `atol=1e-9` in both, so that the tiny
outputs of long rows are compared relatively, not waved through.

Without a GPU the Triton interpreter and Pallas' interpret mode run the small shapes only (the
262147-column row would take minutes in an interpreter).
''')
code(nb, r'''
warnings.filterwarnings("ignore", "invalid value encountered", RuntimeWarning)  # -inf - -inf in the CPU interpreters: intended
VARIANTS = {
    "torch": torch_softmax,
    "cuda_naive": cuda_naive,
    "cuda_online": cuda_online,
    "cuda_vec": cuda_vec,
    "cuda_warp": cuda_warp,
    "cuda_smem": cuda_smem,
    "triton": triton_softmax,
    "pallas": pallas_softmax,
}
LONG_ROW = (5, 262144 + 3)
CHECK_SHAPES = [(3, 1), (7, 1000), (33, 4097)] + ([LONG_ROW] if labmagic.has_gpu() else [])
if not labmagic.has_gpu():
    print(f"no GPU: the {LONG_ROW[0]}x{LONG_ROW[1]} check shape needs one (too slow for the interpreters); skipped")
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-9), torch.bfloat16: dict(rtol=1.6e-2, atol=1e-9)}

def planted(rows, cols, dtype, seed, masked_row=True):
    """Fresh random rows, with a large-magnitude row, a partly masked row and (optionally) a fully masked row."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(rows, cols, device=device, generator=gen)
    x[0] *= 100
    if rows > 1:
        x[1, 1::3] = NEG_INF
    if rows > 2 and masked_row:
        x[2] = NEG_INF
    return x.to(dtype)

def check(variant, rows, cols, dtype, seed):
    x = planted(rows, cols, dtype, seed)
    out = torch.full_like(x, float("inf"))
    y = variant(x, out=out)
    torch.testing.assert_close(y, torch.softmax(x, -1), equal_nan=True, **TOL[dtype])
    exact = torch.softmax(x.double(), -1)
    assert torch.equal(y.isnan(), exact.isnan()), "NaN exactly where torch has NaN"
    ok = ~exact.isnan()
    return ((y.double() - exact)[ok].abs() / exact[ok].abs().clamp_min(1e-30)).max().item()

''')
code(nb, r'''
# Runs every variant on every check shape (skipped when %ncu replays this notebook in a child).
results, failures = [], []
for dtype in (torch.float32, torch.bfloat16):
    for name, variant in VARIANTS.items():
        for i, (r, c) in enumerate(CHECK_SHAPES):
            try:
                err = check(variant, r, c, dtype, seed=100 * i + len(results))
                status = f"ok, max rel err vs float64 {err:.1e}"
            except labmagic.NoGPUError:
                status = "needs a GPU: skipped"
            except AssertionError as exc:  # report every failure, then fail the cell
                status = "FAILED: " + str(exc).strip().splitlines()[0]
                failures.append((name, str(dtype), r, c))
            results.append((name, dtype, r, c, status))
width = max(len(r[0]) for r in results)
for name, dtype, r, c, status in results:
    print(f"{name:<{width}}  {str(dtype).removeprefix('torch.'):<8} {r}x{c:<7} {status}")
assert not failures, f"variants disagree with torch: {failures}"
''', tags=['no-replay'])
md(nb, r'''
## The races

One race per dtype, declared once as data. `%bench` checks every variant against torch on the odd
shapes (fresh random inputs with a scaled row and a partly masked row; the fully masked row is left to
the cell above, because `%bench` rightly refuses a reference that contains NaN), then times them with
CUDA events over rotated input sets, re-checks the timed outputs, and writes
`results/<gpu>/bench/03_online_softmax.csv` (the dtype is part of each row's key). Without a GPU it
shows the prediction for an H200 and says that nothing was measured.
''')
code(nb, r'''
TOTAL = 2**28  # elements per call in the sweep: 1 GiB in fp32, several times the 60 MB L2
if size == "full":
    shapes = [(TOTAL // c, c) for c in (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144)]  # 32768x8192 included
else:
    shapes = [(256, 1024), (64, 8192)]

def make_race(dtype):
    def make_inputs(rows, cols):
        return (planted(rows, cols, dtype, seed=torch.seed() % 2**31, masked_row=False),)
    return labmagic.Race(
        chapter="03_online_softmax",
        variants=VARIANTS,
        ref="torch",
        make_inputs=make_inputs,
        shapes=shapes,
        check_shapes=CHECK_SHAPES,
        flops=lambda rows, cols: 5 * rows * cols,
        nbytes=lambda rows, cols: 2 * rows * cols * torch.finfo(dtype).bits // 8,  # read once, write once
        dtype=str(dtype).removeprefix("torch."),
        **TOL[dtype],
    )

race_fp32 = make_race(torch.float32)
race_bf16 = make_race(torch.bfloat16)
print("shapes:", ", ".join(f"{r}x{c}" for r, c in shapes))
''')
code(nb, '%bench race_fp32')
code(nb, '%bench race_bf16')
md(nb, r'''
## What we measured

*Measured on the H200: (filled from the run).* The sentences below are placeholders until the
H200 run's table is above; each names what to read off it.

- At 32768×8192: the best variant's share of the copy bandwidth (target ≥ 85%) in fp32 and bf16, and
  its speed-up over torch (targets 1.5× fp32, 2.5× bf16): *(filled from the run)*.
- Short rows (1024, 2048): whether `cuda_warp` beats the one-block-per-row kernels as predicted:
  *(filled from the run)*.
- Long rows (≥ 65536): how far the two-pass kernels fall when the second read misses L2, and whether
  `cuda_smem` stays flat: *(filled from the run)*.
- `cuda_naive` vs `cuda_online` vs `cuda_vec`: what each idea bought: *(filled from the run)*.

## What is next

RMSNorm (chapter 04) has the same shape of problem with a simpler reduction (a sum of squares, no
max), and chapter 05 fuses the two: softmax(RMSNorm(x)) needs the row three times, which is where
keeping it on chip pays most.
''')
save(nb, HERE + '/../../03_online_softmax.ipynb')
print('written')
