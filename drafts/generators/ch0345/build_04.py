import sys
HERE = __import__('os').path.dirname(__import__('os').path.abspath(__file__))
sys.path.insert(0, HERE)
from nbgen import new_nb, md, code, cuda, save, cu, BAK

nb = new_nb()
md(nb, r'''
# 04 · RMSNorm: one statistic, one read

$y_{ij} = \dfrac{x_{ij}}{\sqrt{\frac{1}{n}\sum_k x_{ik}^2 + \varepsilon}}\; w_j$ over the last dimension
(`n = cols`), with a learned weight $w$ per column: the normalization in front of every attention and
MLP block of Llama-style models (`eps = 1e-6` here, as in Llama). Unlike LayerNorm there is no mean to
subtract, so the statistic is a single sum of squares: one pass, one reduction. Like softmax (chapter
03) every output needs the whole row's statistic, so the row must be seen twice, and the whole game is
to see it twice while reading it from DRAM once.

**The race.** The baseline is `torch.nn.functional.rms_norm(x, (cols,), w, eps)` (eager).

| variant | the one idea |
|---|---|
| `cuda_block` | one block per row, scalar loads, warp-shuffle + block reduction of the sum of squares; a second pass re-reads x |
| `cuda_vec` | the same with 16-byte loads and stores, scalar head and tail for unaligned rows; w vectorized where it lines up with x |
| `cuda_warp` | one row per warp: 5 shuffles are the whole reduction, no shared memory, no barrier |
| `cuda_smem` | the row's slice staged in shared memory, so DRAM sees x once; long rows split over a thread-block cluster that adds its partial sums through distributed shared memory |
| `triton` | the whole row in registers up to 16384 columns, else a two-pass loop |
| `pallas` | the two-pass loop in JAX Pallas (the shape of JAX's own Pallas GPU `rms_norm`) |

fp32 and bf16 (bf16 in and out, fp32 accumulation), one race per dtype.
''')
code(nb, 'size = "full"  # papermill parameter: "quick" for a smoke run, "full" for the book\'s numbers', tags=['parameters'])
code(nb, r'''
%load_ext labmagic
import functools
import math
import warnings

import torch
import torch.nn.functional as F
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
EPS = 1e-6
''')
md(nb, r'''
## Bytes, flops and the roofline, before measuring

Per element: read $x$, write $y$: $2s$ bytes ($s$ = 4 or 2), plus $w$ once per call ($s \cdot$ cols,
negligible: every row reads the same $w$ from L2). About 4 flops per element (square, add, two
multiplies): intensity $1/2$ (fp32) or $1$ (bf16) flop/byte. Memory-bound, by far.

The race counts logical bytes, $2 s \cdot \text{rows} \cdot \text{cols} + s \cdot \text{cols}$. As in
chapter 03, what DRAM serves depends on where the second look at the row comes from:

| variant | requests to L2 per element of x | DRAM per element (expected) |
|---|---|---|
| `cuda_block`, `cuda_vec`, `cuda_warp`, `triton` (long rows), `pallas` | 2 reads + 1 write (+ w) | 1 + 1 while the row survives in L2 until its re-read, 2 + 1 when not |
| `cuda_smem`, `triton` (short rows) | 1 read + 1 write (+ w) | 1 + 1 |

The re-read survives in L2 when (resident blocks) × (row bytes) stays well under the 60 MB L2: at
8192 fp32 columns (32 KB rows) and up to 8 blocks per SM that is ~34 MB, borderline; at 262144
columns (1 MB rows) it is > 100 MB, so the second pass of the two-pass kernels comes from DRAM and
they move 1.5 × the logical bytes.

**The sweep**: rows × cols = $2^{28}$ at every row length from 1024 to 262144. The floor at ~4.3 TB/s
(measured copy, read + write) is **0.50 ms** in fp32 and **0.25 ms** in bf16.

**Predictions, written down before the run:**

- At 32768×8192 `cuda_smem` and `triton` reach 85-90% of the copy bandwidth in both dtypes; `cuda_vec`
  and `cuda_warp` close behind if the re-read hits L2.
- `cuda_block` (scalar) is within ~15% in fp32 (4-byte loads still coalesce) and further behind in
  bf16 (2-byte loads: twice the load instructions per byte).
- Short rows: `cuda_warp` best (no barriers; 8 rows per block). Long rows: `cuda_warp` collapses (too
  few rows to fill the GPU with warps that each stream a whole row), the two-pass kernels lose up to a
  third (second read from DRAM), `cuda_smem` stays flat.
- torch: whether eager `rms_norm` is one fused kernel or a composite of several elementwise and
  reduction kernels depends on the torch build; the race will show which by its time (a composite moves
  several times the logical bytes).
''')
md(nb, r'''
## The CUDA variants

Templates over the storage type, instantiated for `float` and `__nv_bfloat16`; the resource report
under each cell must show no spills and no stack.

### Rungs 1-3: block per row, 16-byte vectors, warp per row
''' + ('' if BAK else r'''
The vector rungs load in batches of four 16-byte vectors per thread (`batched`, as in chapter 03), and
load $w$ in the same batches: $w$ is served by L2, whose latency is not much shorter than DRAM's.'''))
cuda(nb, cu(HERE + '/rms_a.cu'), "-n 'rmsnorm_block<float>' -n 'rmsnorm_block<__nv_bfloat16>' -n 'rmsnorm_vec<float>' -n 'rmsnorm_vec<__nv_bfloat16>' -n 'rmsnorm_warp<float>' -n 'rmsnorm_warp<__nv_bfloat16>'")
md(nb, r'''
### Rung 4: the row in shared memory, long rows over a cluster

The same structure as chapter 03's `cuda_smem`, with a sum in place of the $(m, d)$ merge.
''')
cuda(nb, cu(HERE + '/rms_b.cu'), "-n 'rmsnorm_smem<float>' -n 'rmsnorm_smem<__nv_bfloat16>' -n 'rmsnorm_cluster<float, 2>' -n 'rmsnorm_cluster<float, 4>' -n 'rmsnorm_cluster<float, 8>' -n 'rmsnorm_cluster<__nv_bfloat16, 2>' -n 'rmsnorm_cluster<__nv_bfloat16, 4>' -n 'rmsnorm_cluster<__nv_bfloat16, 8>'")
md(nb, r'''
The launchers share one signature, `variant(x, w, out=None) -> y`.
''')
code(nb, r'''
def _out(x, w, out):
    y = torch.empty_like(x) if out is None else out
    # The vector paths assume 16-byte aligned bases (torch's allocations are 256-byte aligned).
    assert x.data_ptr() % 16 == 0 and w.data_ptr() % 16 == 0 and y.data_ptr() % 16 == 0, "16-byte aligned tensors expected"
    return y

def _pick(x, for_fp32, for_bf16):
    return {torch.float32: for_fp32, torch.bfloat16: for_bf16}[x.dtype]

BLOCK_THREADS = 256
WARPS_PER_BLOCK = 8

def cuda_block(x, w, out=None):
    y, (rows, cols) = _out(x, w, out), x.shape
    _pick(x, rmsnorm_block_float, rmsnorm_block_nv_bfloat16)(x, w, y, cols, EPS, grid=rows, block=BLOCK_THREADS)
    return y

def cuda_vec(x, w, out=None):
    y, (rows, cols) = _out(x, w, out), x.shape
    _pick(x, rmsnorm_vec_float, rmsnorm_vec_nv_bfloat16)(x, w, y, cols, EPS, grid=rows, block=BLOCK_THREADS)
    return y

def cuda_warp(x, w, out=None):
    y, (rows, cols) = _out(x, w, out), x.shape
    _pick(x, rmsnorm_warp_float, rmsnorm_warp_nv_bfloat16)(
        x, w, y, rows, cols, EPS, grid=triton.cdiv(rows, WARPS_PER_BLOCK), block=32 * WARPS_PER_BLOCK)
    return y

SLICE_BYTES = 64 * 1024  # shared memory per block before the row is split over a bigger cluster
SMEM_KERNELS = {
    (torch.float32, 1): rmsnorm_smem_float, (torch.bfloat16, 1): rmsnorm_smem_nv_bfloat16,
    (torch.float32, 2): rmsnorm_cluster_float_2, (torch.bfloat16, 2): rmsnorm_cluster_nv_bfloat16_2,
    (torch.float32, 4): rmsnorm_cluster_float_4, (torch.bfloat16, 4): rmsnorm_cluster_nv_bfloat16_4,
    (torch.float32, 8): rmsnorm_cluster_float_8, (torch.bfloat16, 8): rmsnorm_cluster_nv_bfloat16_8,
}

def smem_plan(cols, elsize):
    """(cluster size, shared bytes per block, threads per block) for one row of `cols` elements."""
    nvec = cols // (16 // elsize)
    cl = 1
    while cl < 8 and cols * elsize > cl * SLICE_BYTES:
        cl *= 2
    per = triton.cdiv(nvec, cl)
    threads = min(1024, max(64, triton.next_power_of_2(triton.cdiv(per, 8))))  # ~8 vectors per thread
    return cl, per * 16, threads

def cuda_smem(x, w, out=None):
    y, (rows, cols) = _out(x, w, out), x.shape
    cl, smem, threads = smem_plan(cols, x.element_size())
    SMEM_KERNELS[x.dtype, cl](x, w, y, cols, EPS, grid=rows * cl, block=threads, smem=smem)
    return y

def torch_rmsnorm(x, w, out=None):
    y = F.rms_norm(x, (x.shape[-1],), w, EPS)
    return y if out is None else out.copy_(y)

for cols in (1024, 8192, 65536, 262144):
    for dt, s in (("fp32", 4), ("bf16", 2)):
        cl, smem, threads = smem_plan(cols, s)
        print(f"cuda_smem plan, {dt} x {cols:>6} cols: cluster of {cl}, {smem // 1024:>3} KB shared and {threads:>4} threads per block")
''')
md(nb, r'''
## Triton and Pallas

Triton: the whole row in registers up to 16384 columns (one DRAM read), else two loops, the first
marked `evict_last` and the second `evict_first` so that L2 keeps the row until its re-read. Pallas:
the per-row body of JAX's own Pallas GPU `rms_norm`, without the bias, `vmap`ped over rows.
''')
code(nb, r'''
TRITON_ROW_MAX = 16384
TRITON_LOOP_BLOCK = 4096

@triton.jit
def rmsnorm_row_kernel(x_ptr, w_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # rows * cols can pass 2**31
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    r = 1.0 / tl.sqrt(tl.sum(x * x, 0) / cols + eps)
    tl.store(y_ptr + row * cols + offs, (x * r * w).to(y_ptr.dtype.element_ty), mask=mask)

@triton.jit
def rmsnorm_loop_kernel(x_ptr, w_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row, y_row = x_ptr + row * cols, y_ptr + row * cols
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < cols, other=0.0, eviction_policy="evict_last").to(tl.float32)
        acc += x * x
    r = 1.0 / tl.sqrt(tl.sum(acc, 0) / cols + eps)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < cols
        x = tl.load(x_row + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + offs, (x * r * w).to(y_ptr.dtype.element_ty), mask=mask)

def triton_rmsnorm(x, w, out=None):
    y, (rows, cols) = _out(x, w, out), x.shape
    block = triton.next_power_of_2(cols)
    if block <= TRITON_ROW_MAX:
        rmsnorm_row_kernel[(rows,)](x, w, y, cols, EPS, BLOCK=block, num_warps=min(16, max(1, block // 512)))
    else:
        rmsnorm_loop_kernel[(rows,)](x, w, y, cols, EPS, BLOCK=TRITON_LOOP_BLOCK, num_warps=8)
    return y
''')
code(nb, r'''
def _pallas_rmsnorm_row(x_ref, w_ref, o_ref, *, block, eps):
    n = x_ref.shape[0]
    chunks = pl.cdiv(n, block)

    def sumsq(i, acc):  # pass 1
        idx = i * block + jnp.arange(block)
        x = plgpu.load(x_ref.at[idx], mask=idx < n, other=0.0, eviction_policy="evict_last").astype(jnp.float32)
        return acc + x * x

    r = 1.0 / jnp.sqrt(lax.fori_loop(0, chunks, sumsq, jnp.zeros((block,), jnp.float32)).sum() / n + eps)

    @pl.loop(0, chunks)
    def _(i):  # pass 2
        idx = i * block + jnp.arange(block)
        mask = idx < n
        x = plgpu.load(x_ref.at[idx], mask=mask, other=0.0, eviction_policy="evict_first").astype(jnp.float32)
        w = plgpu.load(w_ref.at[idx], mask=mask, other=0.0).astype(jnp.float32)
        plgpu.store(o_ref.at[idx], (x * r * w).astype(o_ref.dtype), mask=mask)

def _pallas_plan(cols):
    block = min(4096, max(128, pl.next_power_of_2(cols)))
    return block, min(8, max(1, block // 256))

@jax.jit
def pallas_rmsnorm_jax(x, w):
    block, warps = _pallas_plan(x.shape[-1])
    row = labmagic.pallas_call(
        functools.partial(_pallas_rmsnorm_row, block=block, eps=EPS),
        out_shape=jax.ShapeDtypeStruct(x.shape[-1:], x.dtype), grid=(),
        compiler_params=plgpu.CompilerParams(num_warps=warps),
    )
    return jax.vmap(row, in_axes=(0, None))(x, w)  # vmap over rows becomes the grid

def pallas_rmsnorm(x, w, out=None):
    y = to_torch(pallas_rmsnorm_jax(to_jax(x), to_jax(w)))
    return y if out is None else out.copy_(y)  # JAX allocates its own output
''')
md(nb, r'''
## Correctness, on awkward shapes and awkward values

Shapes that divide nothing (3×1, 7×1000, 33×4097 and, with a GPU, 5×262147), fresh random inputs,
$w = 1 + 0.1\,\mathcal{N}(0, 1)$, and planted rows: row 0 scaled by 100, row 1 scaled by $10^{-4}$
(there $\text{mean}(x^2) \approx 10^{-8}$ and `eps` = $10^{-6}$ dominates: a misplaced `eps` shows),
row 2 with every third element $-\infty$ and row 3 fully $-\infty$. Outputs are poisoned with $+\infty$
first. Rows without infinities are compared with torch on the same device, fp32 `rtol=1e-4` and bf16
`rtol=1.6e-2` (torch may round $x \cdot r$ to bf16 before multiplying by $w$: two roundings, each ≤
$2^{-8}$ relative), `atol=1e-6`; the error column is against float64.

**Rows holding $-\infty$** have an infinite norm: by the definition $\text{rsqrt}(\infty) = 0$, so the
output is NaN where $x = \pm\infty$ ($\infty \cdot 0$) and exactly 0 elsewhere, which is what torch
computes on the CPU. Our variants must give exactly that (a float64 reference, NaN for NaN). torch's
own CUDA kernel is *reported* on these rows rather than judged: in a smoke run on the H200 it returned
NaN where the definition gives 0 for the longer check shapes (33×4097, 5×262147), and the definition's
answer for 7×1000, so its long-row path derives the statistic differently (the note under the next
cell records what it does in this run). A NaN row is a defensible answer for an infinite input; the point of
the check is that ours is deliberate and the same on every path.
''')
code(nb, r'''
warnings.filterwarnings("ignore", "invalid value encountered", RuntimeWarning)  # inf * 0 in the CPU interpreters: intended
VARIANTS = {
    "torch": torch_rmsnorm,
    "cuda_block": cuda_block,
    "cuda_vec": cuda_vec,
    "cuda_warp": cuda_warp,
    "cuda_smem": cuda_smem,
    "triton": triton_rmsnorm,
    "pallas": pallas_rmsnorm,
}
LONG_ROW = (5, 262144 + 3)
CHECK_SHAPES = [(3, 1), (7, 1000), (33, 4097)] + ([LONG_ROW] if labmagic.has_gpu() else [])
if not labmagic.has_gpu():
    print(f"no GPU: the {LONG_ROW[0]}x{LONG_ROW[1]} check shape needs one (too slow for the interpreters); skipped")
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-6), torch.bfloat16: dict(rtol=1.6e-2, atol=1e-6)}

def planted(rows, cols, dtype, seed, infinite_rows=True):
    """Fresh random inputs (x, w) with a large row, a tiny row and (optionally) partly and fully -inf rows."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(rows, cols, device=device, generator=gen)
    w = 1 + 0.1 * torch.randn(cols, device=device, generator=gen)
    x[0] *= 100
    if rows > 1:
        x[1] *= 1e-4
    if rows > 2 and infinite_rows:
        x[2, 1::3] = -float("inf")
    if rows > 3 and infinite_rows:
        x[3] = -float("inf")
    return x.to(dtype), w.to(dtype)

def reference64(x, w):
    x64 = x.double()
    return x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + EPS) * w.double()

def check(name, variant, rows, cols, dtype, seed):
    x, w = planted(rows, cols, dtype, seed)
    out = torch.full_like(x, float("inf"))
    y = variant(x, w, out=out)
    exact = reference64(x, w)
    finite = torch.isfinite(x).all(-1)  # rows without infinities: compared with torch
    torch.testing.assert_close(y[finite], torch_rmsnorm(x, w)[finite], **TOL[dtype])
    # Rows holding -inf: the definition gives rsqrt(inf) = 0, so NaN where x is infinite and 0 elsewhere,
    # exactly (float64 reference, NaN for NaN). torch itself is reported on these rows, not judged.
    if name == "torch":
        if not torch.equal(y[~finite].isnan(), exact[~finite].isnan()):
            torch_notes.append(f"{str(dtype).removeprefix('torch.')} {rows}x{cols}: torch gives NaN in "
                               f"{int(y[~finite].isnan().sum())} of the infinite rows' elements, the definition in "
                               f"{int(exact[~finite].isnan().sum())}")
    else:
        torch.testing.assert_close(y[~finite].double(), exact[~finite], equal_nan=True, rtol=0, atol=0)
    ok = ~exact.isnan()
    return ((y.double() - exact)[ok].abs() / exact[ok].abs().clamp_min(1e-30)).max().item()

''')
code(nb, r'''
# Runs every variant on every check shape (skipped when %ncu replays this notebook in a child).
results, failures, torch_notes = [], [], []
for dtype in (torch.float32, torch.bfloat16):
    for name, variant in VARIANTS.items():
        for i, (r, c) in enumerate(CHECK_SHAPES):
            try:
                err = check(name, variant, r, c, dtype, seed=100 * i + len(results))
                status = f"ok, max rel err vs float64 {err:.1e}"
            except labmagic.NoGPUError:
                status = "needs a GPU: skipped"
            except AssertionError as exc:
                status = "FAILED: " + str(exc).strip().splitlines()[0]
                failures.append((name, str(dtype), r, c))
            results.append((name, dtype, r, c, status))
width = max(len(r[0]) for r in results)
for name, dtype, r, c, status in results:
    print(f"{name:<{width}}  {str(dtype).removeprefix('torch.'):<8} {r}x{c:<7} {status}")
for note in torch_notes:
    print("note, torch on rows holding -inf:", note)
assert not failures, f"variants disagree: {failures}"
''', tags=['no-replay'])
md(nb, r'''
## The races

One race per dtype. `%bench` checks each variant against torch on the odd shapes (fresh random inputs
with the large and tiny rows; the infinite rows stay in the cell above, because `%bench` refuses a
reference holding NaN), times them with CUDA events over rotated input sets, re-checks the timed
outputs, and writes `results/<gpu>/bench/04_rmsnorm.csv`. Without a GPU it shows the prediction.
''')
code(nb, r'''
TOTAL = 2**28  # elements per call in the sweep: 1 GiB in fp32, several times the 60 MB L2
if size == "full":
    shapes = [(TOTAL // c, c) for c in (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144)]
else:
    shapes = [(256, 1024), (64, 8192)]

def make_race(dtype):
    def make_inputs(rows, cols):
        return planted(rows, cols, dtype, seed=torch.seed() % 2**31, infinite_rows=False)
    elsize = torch.finfo(dtype).bits // 8
    return labmagic.Race(
        chapter="04_rmsnorm",
        variants=VARIANTS,
        ref="torch",
        make_inputs=make_inputs,
        shapes=shapes,
        check_shapes=CHECK_SHAPES,
        flops=lambda rows, cols: 4 * rows * cols,
        nbytes=lambda rows, cols: 2 * rows * cols * elsize + cols * elsize,  # x once, y once, w once
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

*Measured on the H200: (filled from the run).* Each line names what to read off the tables above.

- At 32768×8192: the best variant's share of the copy bandwidth (target ≥ 85%) in fp32 and bf16, and its
  speed-up over torch eager: *(filled from the run)*.
- What the torch row says about eager `rms_norm` (one kernel or a composite): *(filled from the run)*.
- Short rows: `cuda_warp` vs the block-per-row kernels: *(filled from the run)*.
- Long rows: the two-pass kernels against `cuda_smem` once the re-read leaves L2: *(filled from the run)*.

## What is next

Chapter 05 chains the two reductions: softmax(RMSNorm(x)). Composed from two kernels, the
intermediate makes a round trip through DRAM (4 logical passes over the data instead of 2); fused,
the row is read once and both statistics come from the copy on chip.
''')
save(nb, HERE + '/../../04_rmsnorm.ipynb')
print('written')
