"""Chapter 07's attention kernels as a library: call them from a script, check them against an fp64 reference.

    python examples/attention.py            # the Triton kernel (in Triton's interpreter without a GPU)
    python examples/attention.py --all      # on a GPU: also the CUDA kernels, FA3's schedule among them

`labmagic.kernel(chapter, variant)` replays the chapter's code up to its first race (its CUDA cells compile through
the same cache as in the notebook) and returns the variant as a plain callable: `fn(q, k, v, causal=...)` returns
`(o, lse)`, O in the inputs' dtype and the logsumexp in fp32. Exit status 1 if any kernel disagrees.
"""

from __future__ import annotations

import argparse
import sys

import labmagic  # before torch/triton: without a GPU it switches Triton to its interpreter

# isort: split
import torch

#: bf16 P and V (the chapter's derivation): O within 2e-2 relative + 1e-2 absolute; lse is fp32 from fp32 scores.
RTOL, ATOL, LSE_TOL = 2e-2, 1e-2, 1e-3


def reference(q, k, v, causal):
    """fp64 attention and logsumexp: the bf16 inputs are exact in it, so only the kernel rounds."""
    s = q.double() @ k.double().transpose(-1, -2) * q.shape[-1] ** -0.5
    if causal:  # top-left aligned, as the chapter's kernels and SDPA's is_causal: query i sees keys j <= i
        s.masked_fill_(torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    return torch.exp(s - lse[..., None]) @ v.double(), lse


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="on a GPU, also chapter 07's CUDA kernels")
    args = parser.parse_args(argv)
    gpu = labmagic.has_gpu()
    device = labmagic.torch_device()
    names = ["triton_flash"]
    if gpu and args.all:
        names += ["cuda_flash"] + (["cuda_wgmma_pingpong"] if torch.cuda.get_device_capability() >= (9, 0) else [])
    # Odd lengths that no tile divides; on a GPU, a 4k prefill at d = 128.
    shapes = [(2, 4, 4096, 4096, 128), (1, 3, 1031, 1031, 128)] if gpu else [(1, 2, 45, 45, 64), (2, 1, 17, 37, 64)]
    generator = torch.Generator(device=device).manual_seed(0)
    failed = 0
    for name in names:
        fn = labmagic.kernel("07_attention", name)
        for B, H, Sq, Sk, D in shapes:
            q, k, v = (torch.randn(B, H, S, D, device=device, generator=generator).to(torch.bfloat16)
                       for S in (Sq, Sk, Sk))
            for causal in (False, True):
                o, lse = fn(q, k, v, causal=causal)
                o_ref, lse_ref = reference(q, k, v, causal)
                err = ((o.double() - o_ref).abs() / (ATOL + RTOL * o_ref.abs())).max().item()
                lse_err = ((lse.double() - lse_ref).abs() / (LSE_TOL + LSE_TOL * lse_ref.abs())).max().item()
                ok = err <= 1 and lse_err <= 1  # NaN compares false: never ok
                failed += not ok
                print(f"{name:<20} {B}x{H}x{Sq}x{Sk}x{D} causal={causal!s:<5} "
                      f"worst |err| / tol: O {err:.3f}, lse {lse_err:.3f}  {'ok' if ok else 'MISMATCH'}")
    print(f"{len(names)} kernel(s), {failed} mismatch(es)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
