"""The child side of ``python -m labmagic.child``: rebuild one variant of a chapter's race and call it, for a tool that
must own the process (Nsight Compute, compute-sanitizer) or for a plain smoke run.

    python -m labmagic.child --chapter 01 --variant cuda_float4 --shape 268435456 --mode ncu

Modes:

- ``ncu``: warm up outside the profiled range (Triton/JAX compile, CuPy module load, allocator), then
  ``cudaProfilerStart`` (``torch.cuda.profiler.start()``), the variant ``--iters`` times inside an NVTX
  range named after it, synchronize, ``cudaProfilerStop``. Run under
  ``ncu --profile-from-start off`` only the variant's kernels are profiled, never input creation.
- ``sanitize``: one call and a synchronize. compute-sanitizer checks every kernel of the process,
  including the chapter's own replayed cells (tag costly ones ``no-replay``).
- ``run``: like ``ncu`` without a tool: checks the mechanism works (also on a CPU machine).
- ``list``: print the race's variants, shapes and check shapes; call nothing.
- ``nsight-time``: every (variant, shape) of ``--jobs FILE``, each call between marker kernels, for the parent's
  cross-check of ``%bench`` against Nsight Compute (:mod:`labmagic.child.ncu_time`).
- ``bench``: the races, shapes and variants of ``--spec FILE`` checked, timed and saved as ``%bench`` does, for
  ``labmagic bench`` (:mod:`labmagic.benchmark.chapter_bench`); the record holds the tables to print.

The last stdout line starting with ``LABMAGIC-CHILD `` is a JSON record for the parent: the race's
predicted bytes and FLOPs at the shape, or the error that stopped the child.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import traceback

from ..store.schema import shape_str
from .protocol import MARKER, param_arg, parse_params, parse_shape
from .replay import variant_and_inputs


def synchronize(out) -> None:
    """Wait for the variant's work: JAX arrays by ``block_until_ready`` (JAX runs on its own streams),
    then the whole device through torch."""
    stack = [out]
    while stack:
        item = stack.pop()
        if isinstance(item, (tuple, list)):
            stack.extend(item)
        elif hasattr(item, "block_until_ready"):
            item.block_until_ready()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()
    except ImportError:
        pass


def _report(record: dict) -> None:
    sys.stdout.flush()
    print(MARKER + json.dumps(record, default=str), flush=True)


def _profiler(on: bool) -> None:
    import torch

    if not torch.cuda.is_available():
        return
    (torch.cuda.profiler.start if on else torch.cuda.profiler.stop)()


def _unpool_cupy() -> None:
    """CuPy's memory pool hides out-of-bounds accesses from memcheck just like torch's cache."""
    if "cupy" in sys.modules:
        sys.modules["cupy"].cuda.set_allocator(None)


def call_variant(race, variant: str, shape: tuple[int, ...], mode: str, iters: int, warmup: int) -> dict:
    fn, inputs = variant_and_inputs(race, variant, shape)
    record = {"chapter": race.chapter, "variant": variant, "shape": shape_str(shape), "mode": mode}
    flops = getattr(race, "flops", None)
    nbytes = getattr(race, "nbytes", None)
    record["flops"] = float(flops(*shape)) if flops else None
    record["nbytes"] = float(nbytes(*shape)) if nbytes else None
    if mode == "sanitize":
        _unpool_cupy()
        synchronize(fn(*inputs))
        return record
    for _ in range(warmup):
        synchronize(fn(*inputs))
    try:
        import torch

        nvtx = torch.cuda.nvtx if torch.cuda.is_available() else None
    except ImportError:
        nvtx = None
    _profiler(True)
    if nvtx:
        nvtx.range_push(variant)
    out = None
    for _ in range(iters):
        out = fn(*inputs)
    synchronize(out)
    if nvtx:
        nvtx.range_pop()
    _profiler(False)
    record["iters"] = iters
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labmagic.child", description=__doc__.split("\n\n")[0])
    parser.add_argument("--chapter", required=True, help="chapter number, stem, name or notebook path")
    parser.add_argument("--variant", help="variant of the race to call (required except with --mode list)")
    parser.add_argument("--shape", nargs="+", default=None, help="sizes: 4096, 4096x4096, 2**20 (default: largest)")
    parser.add_argument("--check-shape", action="store_true",
                        help="without --shape: use the race's largest check shape instead of its largest shape")
    parser.add_argument("--mode", choices=("ncu", "sanitize", "run", "list", "nsight-time", "bench"), default="run")
    parser.add_argument("--iters", type=int, default=1, help="calls inside the profiled range (ncu, run)")
    parser.add_argument("--warmup", type=int, default=2, help="calls before the profiled range (ncu, run)")
    parser.add_argument("--jobs", help="JSON file of [{variant, shape}, ...] to time (--mode nsight-time)")
    parser.add_argument("--spec", help="JSON file of what labmagic bench asks for (--mode bench)")
    parser.add_argument("--race", help="name of the race in the chapter (default: the one %%bench names)")
    parser.add_argument("--skip-dsl", action="store_true",
                        help="replay the chapter's %%%%dsl cells as stand-ins (a CUDA or torch variant needs none)")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE", type=param_arg,
                        help="override a papermill parameter of the chapter (VALUE is a Python literal or a string)")
    args = parser.parse_args(argv)

    params = parse_params(args.param)
    if args.mode == "sanitize":  # before torch/JAX allocate: see labmagic.child.sanitizer_run.UNPOOLED
        import os

        from .sanitizer_run import UNPOOLED

        os.environ.update(UNPOOLED)
    namespace = race = shape = None
    try:
        from .replay import find_race, load_chapter

        if args.mode == "bench":
            from ..benchmark.chapter_bench import BadInput, BenchSpec, run_spec

            spec = BenchSpec.read(args.spec)  # its races decide how far the chapter is replayed
            namespace = load_chapter(args.chapter, parameters=params or None, through=spec.races or None)
            try:
                record = run_spec(namespace, spec)
            except BadInput as exc:
                _report({"ok": False, "error": str(exc), "bad_input": True})
                return 2
            _report({**record, "ok": True})
            return 0
        # A named race may be benched after the first %bench (chapter 08's race_w8a8): replay through its cell.
        namespace = load_chapter(args.chapter, parameters=params or None, skip_dsl=args.skip_dsl,
                                 through=[args.race] if args.race else None)
        race = find_race(namespace, args.race)
        if args.mode == "list":
            _report({"chapter": race.chapter, "variants": list(race.variants), "ref": race.ref,
                     "shapes": [shape_str(s) for s in race.shapes],
                     "check_shapes": [shape_str(s) for s in race.check_shapes]})
            return 0
        if args.mode == "nsight-time":
            from .ncu_time import read_jobs, time_jobs

            _report({**time_jobs(race, read_jobs(args.jobs), args.iters, args.warmup), "ok": True})
            return 0
        if not args.variant:
            raise SystemExit("--variant is required")
        if args.shape:
            shape = parse_shape(args.shape)
        elif args.check_shape and race.check_shapes:
            shape = tuple(max(race.check_shapes, key=math.prod))
        elif race.shapes:
            shape = tuple(max(race.shapes, key=math.prod))
        else:
            raise SystemExit("--shape is required: the race declares no shapes")
        record = call_variant(race, args.variant, shape, args.mode, args.iters, args.warmup)
        if args.mode == "sanitize":  # so findings can quote the cell line they point at
            from .sanitizer_run import kernel_sources

            record["sources"] = kernel_sources(namespace)
        record["ok"] = True
        _report(record)
        return 0
    except SystemExit:
        raise
    except BaseException as exc:  # the parent shows this one line; the traceback goes to stderr
        traceback.print_exc()
        record = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "detail": getattr(exc, "detail", "")}
        if shape is not None:  # a variant that faulted still ran at a shape of a race: the parent names both
            record.update(chapter=race.chapter, shape=shape_str(shape))
        if namespace is not None and args.mode == "sanitize":  # a faulting kernel is what we came to find
            from .sanitizer_run import kernel_sources

            record["sources"] = kernel_sources(namespace)
        _report(record)
        return 1

