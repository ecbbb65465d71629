"""The arguments of the commands that run a chapter's variants (``test``, and in a child ``profile``, ``sanitize``)."""

from __future__ import annotations

from ..child.protocol import list_variants, param_arg, split_param
from ..paths import check_variant_name


def add_chapter_arguments(parser, verb: str) -> None:
    """The arguments every command that runs a chapter's variants takes (test, profile, sanitize)."""
    parser.add_argument("chapter", help="chapter number, stem or name (01, 01_vector_add, vector_add)")
    parser.add_argument("--variant", action="append", help=f"variant(s) to {verb} (default: all)")
    parser.add_argument("--race", help="name of the race in the chapter (default: the one %%bench names)")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE", type=param_arg,
                        help="override a papermill parameter of the chapter")


def chapter_variants(args) -> tuple[dict[str, str], list[str]]:
    """(papermill parameters, variants to run) from :func:`add_chapter_arguments`'s arguments.

    Variant names are checked before any is run: each names its profile report's file.
    """
    params = dict(split_param(p) for p in args.param)
    variants = args.variant or list_variants(args.chapter, params, args.race)["variants"]
    return params, [check_variant_name(v) for v in variants]
