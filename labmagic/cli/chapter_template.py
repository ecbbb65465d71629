"""The notebook ``labmagic new`` writes: a chapter with the structure of ``book/01_vector_add.ipynb``, racing a
placeholder computation (``z = alpha * x + y``) so that every cell runs, on a laptop too, before the kernels are the
author's own.

The cells, in the book's order: the title and the race; the papermill ``parameters`` cell (``size``); the setup
(``%load_ext labmagic`` before Triton); bytes, FLOPs and the roofline before measuring; a small CUDA kernel and its
launcher; the same computation in Triton; the race as data (variants, reference, inputs, awkward check shapes, the
sweep's sizes, FLOPs and bytes, the chapter's name, which names its CSV); ``%bench race --check``, then ``%bench race``;
``%ncu``; and what was learned. The prose says what each section must hold; the numbers come from the first run.
"""

from __future__ import annotations

import nbformat

#: Cells whose output depends on the machine and the run: nbval does not compare them (as in chapter 01).
IGNORE_OUTPUT = "nbval-ignore-output"

_PARAMETERS = 'size = "full"  # papermill parameter: "quick" for a smoke run, "full" for the book\'s numbers'

_SETUP = '''\
%load_ext labmagic
import torch
import triton
import triton.language as tl

import labmagic

device = labmagic.torch_device()
print(f"device: {device}, GPU: {labmagic.runtime.gpu_name() or 'none'}, compile target: {labmagic.target_arch()}")'''

_ROOFLINE = r'''## Bytes, flops and the roofline, before measuring

Per element: read $x_i$ and $y_i$ (8 bytes), write $z_i$ (4 bytes), two FLOPs (one fused multiply-add).

$$\text{bytes}(n) = 12n, \qquad \text{FLOPs}(n) = 2n, \qquad
  \text{arithmetic intensity} = \tfrac{1}{6}\ \text{FLOP/byte}.$$

Far left of any GPU's ridge point: the time is bytes over bandwidth, and the ceiling to hold every variant to is the
memory bandwidth `labmagic calibrate` measured (`results/<gpu>/ceilings.json`), not the FLOP rate.

**Predictions, written down before the first run** (replace these with your computation's): every variant within a
few percent of the measured copy bandwidth at the largest size; at the smallest, launch and latency, not bandwidth.'''

_CUDA_INTRO = '''## The CUDA variant

`%%cuda_kernel` compiles the cell with NVRTC (for this GPU, or for `sm_90` without one) and prints the compiler's
resource report: registers per thread, shared memory, stack frame and spills.'''

_CUDA_KERNEL = '''\
%%cuda_kernel
// One thread per element. Consecutive threads touch consecutive 4-byte words: each warp's access is one
// fully used 128-byte transaction.
extern "C" __global__ void axpy_naive(float alpha, const float* __restrict__ x, const float* __restrict__ y,
                                      float* __restrict__ z, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = fmaf(alpha, x[i], y[i]);  // the guard: n need not be a multiple of the block
}'''

_LAUNCHERS_INTRO = '''Every variant has the same signature, `variant(x, y) -> z`, so the check and the race treat them
alike.'''

_LAUNCHERS = '''\
ALPHA = 0.5
THREADS = 256

def cuda_naive(x, y):
    z, n = torch.empty_like(x), x.numel()
    axpy_naive(ALPHA, x, y, z, n, grid=max(1, labmagic.cdiv(n, THREADS)), block=THREADS)
    return z

def torch_axpy(x, y):
    return torch.add(y, x, alpha=ALPHA)'''

_TRITON_INTRO = '''## Triton

The same computation as a masked block: Triton sees `BLOCK` contiguous offsets and picks the vector width itself.
(Without a GPU, labmagic switched Triton to its interpreter when it loaded.)'''

_TRITON = '''\
@triton.jit
def axpy_kernel(x_ptr, y_ptr, z_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n  # the last block runs past n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(z_ptr + offs, alpha * x + tl.load(y_ptr + offs, mask=mask), mask=mask)

def triton_axpy(x, y):
    z, n = torch.empty_like(x), x.numel()
    axpy_kernel[(labmagic.cdiv(n, 1024),)](x, y, z, ALPHA, n, BLOCK=1024)
    return z'''

_RACE_INTRO = '''## The race

The race is declared once, as data: the variants, the reference, how to make inputs, the awkward shapes every
variant is checked on (lengths that divide nothing), the sizes the sweep times, and the FLOPs and bytes from the
algorithm. `%bench race --check` checks every variant against the reference on the check shapes without timing
anything; `%bench race` checks, then times on the device clock, and on a GPU writes the rows to
`results/<gpu>/bench/{stem}.csv` with their provenance. Without a GPU it shows the prediction for an H200.'''

_RACE = '''\
VARIANTS = {{
    "torch": torch_axpy,
    "cuda_naive": cuda_naive,
    "triton": triton_axpy,
}}
CHECK_SHAPES = [1, 3, 1023, 4099]
sizes = [2**k for k in range(20, 29)] if size == "full" else [2**20, 2**22]

def make_inputs(n):
    return torch.randn(n, device=device), torch.randn(n, device=device)

race = labmagic.Race(
    chapter="{stem}",
    variants=VARIANTS,
    ref="torch",
    make_inputs=make_inputs,
    shapes=sizes,
    check_shapes=CHECK_SHAPES,
    flops=lambda n: 2 * n,
    nbytes=lambda n: 12 * n,
    dtype="float32",
)'''

_NCU_INTRO = '''## Why: Nsight Compute on the CUDA variant

`%ncu` rebuilds the race in a child process under Nsight Compute and profiles only the variant's own kernels at the
race's largest size; the report is saved under `results/<gpu>/profiles/{stem}/`. Compare its DRAM bytes with the
bytes predicted above. Without a GPU it says so in one line.'''

_LEARNED = '''## What we learned

*After the first run on a GPU: name the GPU and the commit, take the medians from
`results/<gpu>/bench/{stem}.csv`, and set them against the predictions above.*

- **Held:** which predictions the measurement bore out, with the numbers.
- **Wrong:** which did not, and what the profile says about why.
- **Next:** what the next chapter, or the next rung, should try.'''


def _title(number: str, name: str, stem: str) -> str:
    title = name.replace("_", " ").capitalize()
    return rf'''# {number} · {title}

*Scaffolded by `labmagic new {name}`. Every cell runs as it is, on a machine without a GPU too, racing a placeholder
computation, $z = \alpha x + y$, so that the chapter's wiring (its race, its checks, its CSV
`results/<gpu>/bench/{stem}.csv`, the sweep's `size` parameter) works before the kernels are yours. Replace the
computation and keep the order of the sections: what is computed, the variants and the bottleneck each should hit,
FLOPs and bytes, the roofline's prediction, the measurement, and what was learned.*

$z = \alpha x + y$ over $n$ `float32` elements.

**The race.** The baseline is torch's `torch.add(y, x, alpha=ALPHA)`. Against it:

| variant | the one idea |
|---|---|
| `cuda_naive` | one thread per element, in CUDA C++ |
| `triton` | the same masked block in Triton |'''


def chapter_notebook(number: str, name: str) -> nbformat.NotebookNode:
    """The chapter ``<number>_<name>`` as a notebook (nothing executed, no outputs)."""
    stem = f"{number}_{name}"
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    cells = [
        md(_title(number, name, stem)),
        code(_PARAMETERS, metadata={"tags": ["parameters"]}),
        code(_SETUP),
        md(_ROOFLINE),
        md(_CUDA_INTRO),
        code(_CUDA_KERNEL),
        md(_LAUNCHERS_INTRO),
        code(_LAUNCHERS),
        md(_TRITON_INTRO),
        code(_TRITON),
        md(_RACE_INTRO.format(stem=stem)),
        code(_RACE.format(stem=stem)),
        code("%bench race --check", metadata={"tags": [IGNORE_OUTPUT]}),
        code("%bench race", metadata={"tags": [IGNORE_OUTPUT]}),
        md(_NCU_INTRO.format(stem=stem)),
        code("%ncu cuda_naive", metadata={"tags": [IGNORE_OUTPUT]}),
        md(_LEARNED.format(stem=stem)),
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb
