"""A/B of chapter 07's headline kernel under two labmagic versions: PYTHONPATH picks which. Prints per-call ms of
cuda_wgmma_pingpong and sdpa_cudnn at 4x16x4096x4096x128 bf16: labmagic's CudaTimer, and 50 back-to-back calls
between two events (host hidden behind the GPU), alternated three times."""
import os, statistics, sys
import labmagic
import torch
from labmagic.child.replay import load_chapter
from labmagic.timing import CudaTimer

tag = sys.argv[1]
ns = load_chapter(os.path.join(os.environ["LABMAGIC_ROOT"], "book", "07_attention.ipynb"))
q, k, v = ns["make_qkv"](4, 16, 4096, 4096, 128)
fns = {"pingpong": ns["cuda_wgmma_pingpong"], "cudnn": ns["sdpa_cudnn"]}
timer = CudaTimer(rep_ms=300)
for rnd in range(3):
    for name, f in fns.items():
        call = lambda a, b, c, f=f: f(a, b, c, causal=False)
        t = timer.time(call, [(q, k, v)])
        for _ in range(3):
            call(q, k, v)
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(50):
            call(q, k, v)
        e.record(); torch.cuda.synchronize()
        h0 = __import__("time").perf_counter(); call(q, k, v); h1 = __import__("time").perf_counter()
        torch.cuda.synchronize()
        print(f"{tag:4} round {rnd} {name:9} timer {t.median_ms:.4f} ms ({t.method})  back-to-back {s.elapsed_time(e)/50:.4f} ms  host {1e3*(h1-h0):.3f} ms", flush=True)
