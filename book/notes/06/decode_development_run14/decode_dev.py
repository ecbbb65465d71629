# Development run 14 (decode_development.txt) ran this with the working tree at the kernel committed as 03c5d34
# and HEAD at f4a083c, whose wgmma_decode is the kernel of 809ed5e ("old").
"""Development run 14 (chapter 06, decode epilogue): the committed wgmma_decode (wgmma_decode_old) against the new
one (CL > 1: the exit barrier's arrive before the stores of Y; CL = 1: the accumulators straight to Y), and the new
one with unsplit weight tiles kept on the shared-memory epilogue (DIRECT_NS = 0). Checks first, then shuffled races
against cuBLAS, three seeds each. Prints to stdout."""
import math
import sys
import time

import torch

from labmagic.child.replay import load_chapter
from labmagic.noise import ratio_interval
from labmagic.timing import CudaTimer, time_in_rounds

t0 = time.time()
ns = load_chapter("book/_dev06.ipynb", {"size": "quick"})
print(f"replayed in {time.time() - t0:.0f} s", flush=True)
hopper, cdiv, operands, tensor_map_2d = ns["hopper"], ns["cdiv"], ns["operands"], ns["tensor_map_2d"]
check, make_inputs, torch_cublas = ns["check"], ns["make_inputs"], ns["torch_cublas"]


def launcher(kind, config):
    args = ", ".join(map(str, config))
    name = {"new": f"wgmma_decode<{args}>", "old": f"wgmma_decode_old<{args}>", "ns0": f"wgmma_decode<{args}, 0>"}[kind]
    kernel = hopper[name]
    nt, r, kb, st, cl = config

    def call(A, B, out=None):
        A, B, C, M, N, K = operands(A, B, out)
        kernel(tensor_map_2d(B, (r, 64)), tensor_map_2d(A, (nt, 64)), C, N, M, K,
               grid=(cdiv(N, r), cdiv(M, nt), cl), block=256,
               smem=st * kb * (r * 128 + max(1024, nt * 128)) + 1024 + 16 * st)
        return C
    return call


SHAPES = ns["DECODE_CHECK_SHAPES"] + [(64, 129, 200), (33, 301, 136), (7, 301, 136), (16, 257, 520), (64, 4096, 4096)]
failures, n = [], 0
cands = [("new", c) for c in ns["DECODE"]] + [("old", c) for c in ns["DEV_CONFIGS"]] + \
        [("ns0", c) for c in ns["DEV_CONFIGS"] if c[-1] == 1 and c[0] != 64]
for kind, cfg in cands:
    fn = launcher(kind, cfg)
    for M, N, K in SHAPES:
        n += 1
        try:
            check(fn, M, N, K, seed=100 * n + 3)
        except AssertionError as exc:
            failures.append((kind, cfg, (M, N, K), str(exc).splitlines()[:3]))
    # a misaligned Y (storage offset of one element): the pair stores must fall back
    M, N, K = 64, 130, 200
    A, B = make_inputs(M, N, K)
    buf = torch.full((M * N + 1,), float("nan"), dtype=torch.bfloat16, device="cuda")
    out = buf[1:].view(M, N)
    C = fn(A, B, out=out)
    ref = A.double() @ B.double().t()
    n += 1
    try:
        torch.testing.assert_close(C.double(), ref, rtol=2e-2, atol=2e-2)
    except AssertionError as exc:
        failures.append((kind, cfg, "misaligned", str(exc).splitlines()[:3]))
torch.cuda.synchronize()
print(f"{n} checks, {len(failures)} mismatches", flush=True)
for f in failures:
    print("MISMATCH", f)
if failures:
    sys.exit(1)

RACES = {
    (1, 4096, 4096): [("old", (8, 64, 2, 5, 2)), ("new", (8, 64, 2, 5, 2)), ("new", (8, 64, 2, 4, 2))],
    (1, 14336, 4096): [("old", (8, 128, 1, 8, 1)), ("new", (8, 128, 1, 8, 1)), ("old", (8, 64, 2, 5, 1)),
                       ("new", (8, 64, 2, 5, 1))],
    (1, 4096, 14336): [("old", (8, 64, 2, 5, 2)), ("new", (8, 64, 2, 5, 2)), ("new", (8, 64, 2, 8, 2))],
    (16, 4096, 4096): [("old", (16, 64, 2, 5, 2)), ("new", (16, 64, 2, 5, 2)), ("new", (16, 64, 2, 8, 2))],
    (16, 14336, 4096): [("old", (16, 64, 2, 5, 1)), ("new", (16, 64, 2, 5, 1)), ("old", (16, 128, 1, 8, 1)),
                        ("new", (16, 128, 1, 8, 1))],
    (16, 4096, 14336): [("old", (16, 64, 2, 5, 2)), ("new", (16, 64, 2, 5, 2)), ("new", (16, 64, 2, 8, 2))],
    (64, 4096, 4096): [("old", (64, 64, 2, 6, 2)), ("new", (64, 64, 2, 6, 2)), ("old", (64, 32, 2, 8, 1)),
                       ("new", (64, 32, 2, 8, 1))],
    (64, 14336, 4096): [("old", (64, 56, 1, 6, 1)), ("new", (64, 56, 1, 6, 1)), ("old", (64, 64, 2, 3, 1)),
                        ("new", (64, 64, 2, 3, 1))],
    (64, 4096, 14336): [("old", (64, 64, 2, 6, 2)), ("new", (64, 64, 2, 6, 2)), ("old", (64, 32, 2, 8, 1)),
                        ("new", (64, 32, 2, 8, 1))],
}
timer = CudaTimer(rep_ms=400.0)
l2 = timer.l2_bytes()
print("\nraces: torch (cuBLAS) and wgmma_decode old/new, 16 shuffled rounds of 400 ms each, seeds 0-2; "
      "GB/s on weight bytes; ratio = cuBLAS time / variant time (>1: faster than cuBLAS), 95% interval", flush=True)
for (M, N, K), variants in RACES.items():
    inputs = [make_inputs(M, N, K) for _ in range(math.ceil(2.5 * l2 / (2 * N * K)))]
    calls = {"torch": torch_cublas}
    for kind, cfg in variants:
        calls[f"{kind} {cfg}"] = launcher(kind, cfg)
    for seed in range(3):
        res = time_in_rounds(timer, calls, inputs, 16, shuffle=seed, set_bytes=2 * (M * K + N * K + M * N))
        ref = res["torch"]
        line = [f"{M}x{N}x{K} seed {seed}: torch {ref.median_ms * 1e3:.2f} us {ref.method}"]
        for name, r in res.items():
            if name == "torch":
                continue
            if isinstance(r, Exception):
                line.append(f"  {name}: ERROR {r}")
                continue
            lo_hi = ratio_interval(ref.times_ms, r.times_ms)
            ratio = ref.median_ms / r.median_ms
            iv = f"[{lo_hi[0]:.3f}, {lo_hi[1]:.3f}]" if lo_hi else "[-]"
            line.append(f"  {name:<22} {r.median_ms * 1e3:7.2f} us {2 * N * K / r.median_ms / 1e6:6.0f} GB/s "
                        f"x{ratio:.3f} {iv}")
        print("\n".join(line), flush=True)
print(f"done in {time.time() - t0:.0f} s")
