"""``labmagic sanitize CHAPTER``: each variant under compute-sanitizer (:mod:`labmagic.child.sanitizer_run`)."""

from __future__ import annotations

from ..child.sanitizer_report import TOOLS
from ..child.sanitizer_run import find_sanitizer, sanitize_variant
from ..runtime import require_gpu
from .chapter_args import add_chapter_arguments, chapter_variants


def add_arguments(parser) -> None:
    add_chapter_arguments(parser, "check")
    parser.add_argument("--tool", choices=TOOLS, default="memcheck", help="compute-sanitizer tool")
    parser.add_argument("--shape", help="shape to run: 4096, 31x17x29 (default: the race's largest check shape)")


def run(args) -> int:
    require_gpu("labmagic sanitize")
    find_sanitizer()
    params, variants = chapter_variants(args)
    dirty = 0
    for variant in variants:
        result = sanitize_variant(args.chapter, variant, args.shape, tool=args.tool, params=params, race=args.race)
        print(repr(result) + "\n")
        dirty += not result.clean
    return 1 if dirty else 0
