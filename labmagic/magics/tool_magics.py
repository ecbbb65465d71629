"""``%ncu`` and ``%sanitize``: why a variant is as fast as it is, and whether it is correct at all.

Both are thin over :func:`labmagic.child.ncu_run.profile_variant` and
:func:`labmagic.child.sanitizer_run.sanitize_variant`, which rebuild the variant in a child process from the
*saved* chapter notebook (see :mod:`labmagic.child.replay` for why, and its limits). The chapter is the one
whose race this notebook defines (``race.chapter``), or ``--chapter``. Defaults are settings:
``%config ExplainMagics.ncu_set = "detailed"``.

On a machine without a GPU both print one line saying so and return nothing, so a chapter still
executes top to bottom there.
"""

from __future__ import annotations

from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Int, Unicode

from ..child.protocol import split_param
from ..errors import LabError
from ..paths import check_variant_name


class ResultList(list):
    """Several variants' results shown one after another."""

    def _repr_html_(self) -> str:
        return "".join(r._repr_html_() for r in self)

    def __repr__(self) -> str:
        return "\n\n".join(repr(r) for r in self)


def _params(items: list[str]) -> dict[str, str]:
    return dict(split_param(item) for item in items)


def _checked(args) -> dict[str, str]:
    """The line's papermill parameters, once its names are checked: on any machine, before a child is started."""
    for variant in args.variant:
        check_variant_name(variant)  # with --chapter nothing else vets it, and it names the report's file
    return _params(args.param)


@magics_class
class ExplainMagics(Magics):
    ncu_set = Unicode("full", config=True, help="Nsight Compute section set (ncu --set).")
    clock_control = Unicode("none", config=True,
                            help="ncu --clock-control: 'none' profiles at the clocks %bench sees; 'base' locks them.")
    iters = Int(1, config=True, help="Calls of the variant inside the profiled range.")
    sanitize_tool = Unicode("memcheck", config=True, help="Default compute-sanitizer tool.")

    def _chapter_and_variants(self, args) -> tuple[str, list[str]]:
        """The chapter and the variants to run; the child replays the race ``args.race`` names (it is passed on:
        a chapter with several races would otherwise give the child its first ``%bench`` race)."""
        from ..child.replay import find_race, races_in

        ns = self.shell.user_ns
        if args.race:
            race = find_race(ns, args.race)
        else:
            races = races_in(ns)
            if len(races) > 1 and not args.chapter:
                names = ", ".join(sorted(name for name, _ in races))
                raise LabError(f"this notebook defines several races ({names}): pass --race NAME or --chapter")
            race = races[0][1] if len(races) == 1 else None
        chapter = args.chapter or getattr(race, "chapter", None)
        if not chapter:
            raise LabError("which chapter? define its race in this notebook first, or pass --chapter 01_vector_add")
        variants = list(args.variant) or (list(race.variants) if race is not None and not args.chapter else [])
        if not variants:
            raise LabError("name the variant(s) to run, e.g. `%ncu cuda_float4`")
        if race is not None and not args.chapter:
            unknown = [v for v in variants if v not in race.variants]
            if unknown:
                raise LabError(f"no variant {', '.join(unknown)} in race {race.chapter!r} "
                               f"(variants: {', '.join(race.variants)})")
        return chapter, variants

    @staticmethod
    def _no_gpu(what: str) -> bool:
        from ..runtime import has_gpu

        if has_gpu():
            return False
        print(f"{what}: needs a CUDA GPU; skipped on this machine (the compile panel, %%cuda_kernel --panel, "
              f"works without one).")
        return True

    @magic_arguments()
    @argument("variant", nargs="*", help="variant(s) of the race to profile (default: all)")
    @argument("--chapter", help="chapter to profile (default: the one whose race this notebook defines)")
    @argument("--race", help="name of the race in this notebook (default: the only one)")
    @argument("--shape", help="shape: 2**28, 4096x4096 (default: the race's largest)")
    @argument("--set", dest="section_set", default=None, help="ncu section set (default: ExplainMagics.ncu_set)")
    @argument("--clock-control", default=None, help="ncu --clock-control (default: none)")
    @argument("--iters", type=int, default=None, help="calls inside the profiled range")
    @argument("--skip-dsl", action="store_true",
              help="the child replays the chapter without running its %%%%dsl cells (their variants are stand-ins): "
                   "faster, for variants that are not DSL ones")
    @argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
              help="override a papermill parameter of the chapter in the child, e.g. -p size=quick")
    @line_magic
    def ncu(self, line: str):
        """Profile variants with Nsight Compute in a child process; show each kernel's summary.

        The full report is saved as results/<gpu>/profiles/<chapter>/<variant>[.<race>].<shape>.ncu-rep (one report
        for several variants, profiled in one child: <v1>-<v2>[.<race>].<shape>.ncu-rep), beside it each variant's
        summary (.csv) and whole raw metric page (.raw.csv), small enough to commit where the report is not.
        """
        from ..child.ncu_run import profile_variants

        args = parse_argstring(self.ncu, line)
        params = _checked(args)
        if self._no_gpu("%ncu"):
            return None
        chapter, variants = self._chapter_and_variants(args)
        results = ResultList(profile_variants(
            chapter, variants, args.shape, section_set=args.section_set or self.ncu_set,
            clock_control=args.clock_control or self.clock_control, iters=args.iters or self.iters, params=params,
            race=args.race, skip_dsl=args.skip_dsl))
        return results[0] if len(results) == 1 else results

    @magic_arguments()
    @argument("variant", nargs="*", help="variant(s) of the race to check (default: all)")
    @argument("--tool", default=None, choices=("memcheck", "racecheck", "initcheck", "synccheck"),
              help="compute-sanitizer tool (default: memcheck)")
    @argument("--chapter", help="chapter (default: the one whose race this notebook defines)")
    @argument("--race", help="name of the race in this notebook (default: the only one)")
    @argument("--shape", help="shape (default: the race's largest check shape)")
    @argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
              help="override a papermill parameter of the chapter in the child")
    @line_magic
    def sanitize(self, line: str):
        """Run variants under compute-sanitizer in a child process; show findings with their cell lines."""
        from ..child.sanitizer_run import sanitize_variant

        args = parse_argstring(self.sanitize, line)
        params = _checked(args)
        if self._no_gpu("%sanitize"):
            return None
        chapter, variants = self._chapter_and_variants(args)
        results = ResultList(
            sanitize_variant(chapter, v, args.shape, tool=args.tool or self.sanitize_tool, params=params,
                             race=args.race)
            for v in variants)
        return results[0] if len(results) == 1 else results


def register(ipython) -> None:
    ipython.register_magics(ExplainMagics)
