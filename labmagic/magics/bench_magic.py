"""``%bench race``: a thin magic over :func:`labmagic.bench`.

It parses its line (``@magic_arguments``, so ``%bench?`` is the manual), looks the race up in the
notebook's namespace, calls ``bench`` and returns the :class:`BenchResult`, which displays itself as
the cell's output (``r = %bench race`` keeps it). Defaults live in the ``Bench`` configurable:
``%config Bench.rep_ms = 200``. ``%bench race --check`` runs only the correctness pass
(:func:`labmagic.benchmark.verify.verify`) and returns its pass/fail table.
"""

from __future__ import annotations

import numbers
import os
import re

from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Bool, Float, Unicode
from traitlets.config import Configurable

from ..errors import LabError

_AXB = re.compile(r"^\d+(x\d+)+$")

#: Set by ``labmagic sweep --sanitize`` for the chapters it executes: every ``%bench`` then sanitizes.
SANITIZE_ENV = "LABMAGIC_BENCH_SANITIZE"

#: Set by ``labmagic sweep --timer``: ``graph``, every ``%bench`` without a ``--timer`` of its own times with the graph
#: timer (over the race's ``timer=``); ``nsight``, every ``%bench`` then cross-checks its table with Nsight.
TIMER_ENV = "LABMAGIC_BENCH_TIMER"


class Bench(Configurable):
    """Defaults of ``%bench`` (``%config Bench.<name> = value``)."""

    rep_ms = Float(100.0, help="Target total time (ms) of the timed calls per variant and shape.").tag(config=True)
    warmup_ms = Float(25.0, help="Warm-up time (ms) before timing (JIT compiles, module loads, clocks).").tag(
        config=True)
    save = Bool(True, help="Write results/<gpu>/bench/<chapter>.csv and .png after a GPU run.").tag(config=True)
    plot = Bool(True, help="Draw latency, memory and roofline plots under the table.").tag(config=True)
    target = Unicode("", help="GPU whose spec sheet the table is judged (no GPU: predicted) against, "
                               "e.g. 'h200', 'a100'. Empty: this GPU, or the H200 without one.").tag(config=True)
    sanitize = Bool(False, help="Run each CUDA variant under compute-sanitizer memcheck after its check, before "
                                f"timing (slow). Also on while {SANITIZE_ENV}=1 (labmagic sweep --sanitize).").tag(
        config=True)
    nsight = Bool(False, help="After timing, re-time every ok row under Nsight Compute in one child and show the "
                              "cross-check table (events vs gpu__time_duration.sum). Also on while "
                              f"{TIMER_ENV}=nsight (labmagic sweep --timer nsight).").tag(config=True)


#: What ``--shapes`` accepts, for its error messages.
SHAPE_FORMS = "a size (4096, 2**20), AxB (4096x4096), a tuple ('(64,128)') or a notebook variable holding one"


def parse_shape(token: str, evaluate) -> tuple[int, ...]:
    """``4096x4096`` -> (4096, 4096); anything else is evaluated in the notebook (``2**20``, ``(64, 128)``)."""
    if len(token) > 1 and token[0] == token[-1] and token[0] in "'\"":
        token = token[1:-1]  # the magic's line splitter keeps quotes: '(64, 128)' is a tuple, not a string
    if _AXB.match(token):
        return tuple(int(t) for t in token.split("x"))
    try:
        value = evaluate(token)
    except Exception as exc:  # noqa: BLE001 - a typo in a shape is a line to fix, not a traceback
        raise LabError(f"--shapes: cannot evaluate {token!r} ({type(exc).__name__}: {exc}); "
                       f"expected {SHAPE_FORMS}") from exc
    dims = _dims(value)
    if not dims:
        raise LabError(f"--shapes: {token!r} is {value!r}, neither a size nor a shape; expected {SHAPE_FORMS}")
    return dims


def _dims(value) -> tuple[int, ...]:
    """A size or a sequence of sizes as a shape; () for anything else (a float, a string of digits, a negative)."""
    if _is_size(value):
        return (int(value),)
    if isinstance(value, (str, bytes)):
        return ()
    try:
        dims = tuple(value)
    except TypeError:
        return ()
    return tuple(int(d) for d in dims) if dims and all(_is_size(d) for d in dims) else ()


def _is_size(value) -> bool:
    """A positive integer (numpy's too), and not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value > 0


@magics_class
class BenchMagics(Magics):
    def __init__(self, shell, settings: Bench | None = None):
        super().__init__(shell)
        self.settings = settings or Bench(parent=shell)

    @magic_arguments()
    @argument("race", help="name of a labmagic.benchmark.Race in the notebook")
    @argument("--shapes", nargs="+", metavar="SHAPE",
              help="shapes to time instead of the race's: 2**20, 4096x4096, '(64,128)'")
    @argument("--variants", help="comma-separated variants to run (the reference always runs)")
    @argument("--check", action="store_true",
              help="only the correctness pass: every variant on the check shapes (--shapes replaces them), "
                   "no timing, nothing saved; returns a pass/fail table")
    @argument("--no-check", action="store_true", help="skip the correctness pass before timing")
    @argument("--no-save", action="store_true", help="do not write results/<gpu>/bench/")
    @argument("--no-plot", action="store_true", help="no plots under the table")
    @argument("--sanitize", action="store_true",
              help="after the check, run each CUDA variant under compute-sanitizer memcheck in a child (the chapter "
                   "replayed from disk); a variant with findings is an error row naming kernel and cell line")
    @argument("--nsight", action="store_true",
              help="after timing, re-time every ok row under Nsight Compute (one child, the chapter replayed from "
                   "disk) and add a table: event median, Nsight median, ratio, verdict (agrees within 5%% from 50 us)")
    @argument("--target", help="GPU spec to judge or predict against (h200, h100, a100, l4, rtx 4090, ...)")
    @argument("--timer", choices=("events", "graph", "nsight"),
              help="events: CUDA events around each call (graphs under 20 us; the default, or the race's timer=); "
                   "graph: every call that can be captured timed in a CUDA graph, the others with events and a note "
                   f"saying why (the default under labmagic sweep --timer graph, which sets {TIMER_ENV}); nsight: "
                   "events, then the --nsight cross-check")
    @line_magic
    def bench(self, line: str):
        """Check, time and judge a race's variants; show one table per shape (see labmagic.benchmark)."""
        from ..benchmark import Race, bench

        args = parse_argstring(self.bench, line)
        race = self.shell.user_ns.get(args.race)
        if not isinstance(race, Race):
            raise LabError(f"%bench: {args.race!r} is not a labmagic.benchmark.Race in this notebook")
        shapes = [parse_shape(t, self.shell.ev) for t in args.shapes] if args.shapes else None
        variants = [v.strip() for v in args.variants.split(",") if v.strip()] if args.variants else None
        if args.check:
            if args.no_check:
                raise LabError("%bench: --check and --no-check contradict each other")
            from ..benchmark.verify import verify

            return verify(race, variants=variants, shapes=shapes)
        s = self.settings
        sanitize = args.sanitize or s.sanitize or sanitize_from_env()
        timer = "events" if args.timer == "nsight" else args.timer or timer_from_env()
        result = bench(race, shapes=shapes, variants=variants, check=not args.no_check,
                       save=None if (s.save and not args.no_save) else False,
                       target=args.target or s.target or None, plot=s.plot and not args.no_plot,
                       rep_ms=s.rep_ms, warmup_ms=s.warmup_ms, sanitize=sanitize, timer=timer)
        if args.nsight or args.timer == "nsight" or s.nsight or nsight_from_env():
            from ..benchmark.ncu_check import nsight_checked  # the child's tooling, only when asked

            nsight_checked(race, result)
        return result


def sanitize_from_env() -> bool:
    """Whether the sweep that runs this notebook asked for ``--sanitize`` (read at each ``%bench``)."""
    return os.environ.get(SANITIZE_ENV, "") not in ("", "0")


def timer_from_env() -> str | None:
    """``graph`` when the sweep that runs this notebook asked for ``--timer graph`` (read at each ``%bench``), else
    None (the race's own timer, or events)."""
    return "graph" if os.environ.get(TIMER_ENV, "").strip().lower() == "graph" else None


def nsight_from_env() -> bool:
    """Whether the sweep that runs this notebook asked for ``--timer nsight`` (read at each ``%bench``)."""
    return os.environ.get(TIMER_ENV, "").strip().lower() == "nsight"


def register(ipython) -> None:
    """Add ``%bench`` and make ``Bench`` visible to ``%config``."""
    settings = Bench(parent=ipython)
    ipython.configurables.append(settings)
    ipython.register_magics(BenchMagics(ipython, settings))
