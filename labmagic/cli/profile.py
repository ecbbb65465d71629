"""``labmagic profile CHAPTER``: the variants under Nsight Compute, in one child (:mod:`labmagic.child.ncu_run`)."""

from __future__ import annotations

import sys

from ..child.ncu_run import ProfilerError, find_ncu, profile_variants
from ..runtime import require_gpu
from .chapter_args import add_chapter_arguments, chapter_variants


def add_arguments(parser) -> None:
    add_chapter_arguments(parser, "profile")
    parser.add_argument("--shape", help="shape to profile: 4096, 4096x4096, 2**28 (default: the race's largest)")
    parser.add_argument("--set", dest="section_set", default="full", help="ncu section set (default: full)")
    parser.add_argument("--clock-control", default="none", help="ncu --clock-control (default: none)")
    parser.add_argument("--iters", type=int, default=1, help="calls inside the profiled range")


def run(args) -> int:
    require_gpu("labmagic profile")
    find_ncu()
    params, variants = chapter_variants(args)
    try:
        results = profile_variants(args.chapter, variants, args.shape, section_set=args.section_set,
                                   clock_control=args.clock_control, iters=args.iters, params=params, race=args.race)
        error = None
    except ProfilerError as exc:
        if "ERR_NVGPUCTRPERM" in str(exc):
            raise
        results, error = exc.results, exc
    for result in results:
        print(repr(result) + "\n")  # its last line names the report
    if error is not None:
        print(str(error), file=sys.stderr)
        return 1
    return 0
