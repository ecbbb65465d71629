"""``labmagic test CHAPTER``: every variant of a chapter's race on its check shapes, nothing timed
(:func:`labmagic.benchmark.verify.verify`); exits 1 when any variant mismatches or raises.

The chapter is replayed in this process (:func:`labmagic.child.replay.load_chapter`), not in a child as
``profile``/``sanitize`` do: no tool has to own the process, and the whole verdict is one result object
rather than one record per variant, so a child would only add a second Python start-up and a JSON round trip.
"""

from __future__ import annotations

from ..child.protocol import parse_params, parse_shape
from ..errors import LabError
from .chapter_args import add_chapter_arguments


def add_arguments(parser) -> None:
    add_chapter_arguments(parser, "test")
    parser.add_argument("--shape", action="append", metavar="SHAPE",
                        help="check shape(s) instead of the race's: 31, 31x17x29, 2**20 (repeatable)")


def _shapes(tokens: list[str] | None) -> list[tuple[int, ...]] | None:
    if not tokens:
        return None
    try:
        return [parse_shape([t]) for t in tokens]
    except SystemExit as exc:
        raise LabError(str(exc)) from None


def run(args) -> int:
    from ..benchmark.verify import verify
    from ..child.replay import find_race, load_chapter

    params = parse_params(args.param)
    shapes = _shapes(args.shape)
    # A named race may be benched after the first %bench (chapter 08's race_w8a8): replay through its cell.
    race = find_race(load_chapter(args.chapter, parameters=params or None, through=[args.race] if args.race else None),
                     args.race)
    result = verify(race, variants=args.variant, shapes=shapes)
    print(repr(result))
    return 1 if result.failed else 0
