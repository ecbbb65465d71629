"""A tiny chapter whose CUDA variant writes one element past its output (and reads one past its inputs), for the GPU
tests of the tools that must catch it: ``%sanitize`` and ``%ncu`` in a child, ``%bench --sanitize``.

check_shapes=(1024,): 4096-byte tensors, so in a child with un-pooled allocations (one cudaMalloc each) ``c[n]`` is
past the allocation memcheck knows. A timed shape that is odd puts the stray element, in the parent's caching
allocator, into the block's rounding slack, where the plain check cannot see it.
"""

from __future__ import annotations

import json
from pathlib import Path

CUDA_CELL = """\
%%cuda_kernel
extern "C" __global__ void vecadd_ok(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" __global__ void vecadd_oob(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= n) c[i] = a[i] + b[i];  // PLANTED: thread n reads a[n] and writes c[n]
}"""

PLANTED = "  if (i <= n) c[i] = a[i] + b[i];  // PLANTED: thread n reads a[n] and writes c[n]"
#: The planted line's number in the cell, as findings quote it.
PLANTED_LINE = 1 + CUDA_CELL.splitlines().index(PLANTED)


def python_cell(chapter: str, shape: int) -> str:
    """The race: ``torch`` (the reference), ``cuda_ok`` and ``cuda_oob``, timed at ``shape``."""
    return f"""\
import torch, triton, labmagic.benchmark

def run(kernel):
    def call(a, b):
        c = torch.empty_like(a)
        # One thread more than elements, so the planted `i <= n` guard lets thread n through.
        kernel(a, b, c, a.numel(), grid=triton.cdiv(a.numel() + 1, 256), block=256)
        return c
    return call

race = labmagic.benchmark.Race(
    chapter={chapter!r}, ref="torch",
    variants={{"torch": torch.add, "cuda_ok": run(vecadd_ok), "cuda_oob": run(vecadd_oob)}},
    make_inputs=lambda n: (torch.randn(n, device="cuda"), torch.randn(n, device="cuda")),
    shapes=[({shape},)], check_shapes=[(1024,)], nbytes=lambda n: 12 * n, flops=lambda n: n)"""


def write_chapter(path: Path, chapter: str, shape: int) -> Path:
    """The chapter as a notebook at ``path`` (what the child replays): load, the CUDA cell, the race, ``%bench``."""
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": s}
             for s in ("%load_ext labmagic", CUDA_CELL, python_cell(chapter, shape), "%bench race")]
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path
