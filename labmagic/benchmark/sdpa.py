"""Which of ``torch.nn.functional.scaled_dot_product_attention``'s implementations served a call (the ``sdpa``
column)."""

from __future__ import annotations

from .provenance import own_text, referenced


def mentions_sdpa(fn) -> bool:
    """Whether ``fn`` (or what it calls) names SDPA: only then is the backend that served it looked up."""
    texts = [own_text(fn) or ""] + [own_text(o) or "" for o in referenced(fn)]
    return any("scaled_dot_product" in t or "sdpa" in t for t in texts)


#: aten op names of SDPA's implementations, as the profiler records them.
_SDPA_OPS = {
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_efficient_attention": "mem_efficient",
    "_scaled_dot_product_cudnn_attention": "cudnn",
    "_scaled_dot_product_attention_math": "math",
    "_scaled_dot_product_fused_attention_overrideable": "overrideable",
}


def sdpa_backend(fn, inputs) -> str:
    """Which SDPA implementation serviced one call of ``fn``, read from torch's profiler op names.

    ``torch.nn.functional.scaled_dot_product_attention`` dispatches to one aten op per backend; the
    profiler (CPU activity only, cheap) records which ran. ``-`` when no SDPA op ran.
    """
    import torch

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn(*inputs)
    found = []
    for event in prof.events():
        op = event.name.removeprefix("aten::")
        if op in _SDPA_OPS:
            found.append(_SDPA_OPS[op])
    return "+".join(dict.fromkeys(found)) or "-"
