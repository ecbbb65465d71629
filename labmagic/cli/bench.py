"""``labmagic bench CHAPTER``: a chapter's race from a terminal, without papermill, one Markdown table per shape.

    labmagic bench 07 --race race_decode --shape 1x16x1x32768x128 --variant cuda_decode
    labmagic bench 01 --quick                  # size='quick'; on a machine without a GPU, CUDA rows "needs GPU"
    labmagic bench 06 --timer graph --plot     # every capturable call in a CUDA graph; the chapter's plots redrawn
    labmagic bench 08 --check                  # the correctness pass alone

The chapter is replayed in a child process, as ``labmagic profile`` replays it (:mod:`labmagic.child.replay`: its
code cells up to its first ``%bench``, or with ``--race``, up to the ``%bench`` of the last race named, so chapter
08's ``race_w8a8`` is reached past the races benched before it); the child runs each named race as ``%bench`` does
and writes its rows to the chapter's CSV through the same writer (:mod:`labmagic.benchmark.chapter_bench`), and this
process prints what it sends back. A child keeps the chapter's CUDA context, its namespace and a kernel that faults
out of this process, which reports them in one line, and it is what ``--nsight`` needs anyway (Nsight Compute replays
the chapter too). A chapter, race, variant or shape that does not exist is one line naming what does, and exit status
2; a variant that mismatches or raises makes it 1.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from ..benchmark.chapter_bench import MODE, BenchSpec
from ..child.protocol import child_env, child_record, log_tail, param_arg, param_args, parse_params, parse_shape
from ..child.replay import benched_races
from ..errors import LabError
from ..paths import chapter_path, check_race_name, check_variant_name, repo_root
from ..store.schema import shape_str


def add_arguments(parser) -> None:
    parser.add_argument("chapter", help="chapter number, stem or name (01, 01_vector_add, vector_add)")
    parser.add_argument("--race", action="append", default=[],
                        help="race(s) to run, by name in the chapter (default: the one its %%bench names)")
    parser.add_argument("--shape", action="append", default=[], metavar="SHAPE",
                        help="shape(s) of the race to run: 4096, 4096x4096, 2**20 (default: all the race's shapes)")
    parser.add_argument("--variant", action="append", default=[],
                        help="variant(s) to run (default: all; the reference always runs)")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE", type=param_arg,
                        help="override a papermill parameter of the chapter")
    parser.add_argument("--quick", action="store_true", help="the chapter's smoke-test sizes (-p size=quick)")
    parser.add_argument("--check", action="store_true", help="only the correctness pass: no timing, nothing saved")
    parser.add_argument("--timer", choices=("events", "graph", "nsight"), default=None,
                        help="events (default, or the race's timer=); graph: every call that can be captured timed "
                             "in a CUDA graph; nsight: events, then the --nsight cross-check")
    parser.add_argument("--nsight", action="store_true",
                        help="after timing, re-time every ok row under Nsight Compute (as %%bench --nsight)")
    parser.add_argument("--plot", action="store_true",
                        help="redraw the chapter's latency-vs-size and peak-memory-vs-size figures beside its CSV")
    parser.add_argument("--no-save", action="store_true", help="do not write results/<gpu>/bench/")


def spec_of(args) -> BenchSpec:
    """The child's :class:`BenchSpec` from the command line: names checked, shapes parsed, before any child starts."""
    if args.check and (args.timer or args.nsight or args.plot):
        raise LabError("--check only checks: drop --timer, --nsight and --plot")
    shapes = []
    for token in args.shape:
        try:
            shapes.append(shape_str(parse_shape([token])))
        except SystemExit as exc:
            raise LabError(str(exc)) from None
    timer = args.timer if args.timer in ("events", "graph") else None
    return BenchSpec(races=[check_race_name(r) for r in args.race], shapes=shapes,
                     variants=[check_variant_name(v) for v in args.variant], timer=timer,
                     check=args.check, nsight=args.nsight or args.timer == "nsight", save=not args.no_save,
                     plot=args.plot)


def bench_command(notebook: Path, spec_file: Path, params: dict) -> list[str]:
    return [sys.executable, "-m", "labmagic.child", "--chapter", str(notebook), "--mode", MODE,
            "--spec", str(spec_file), *param_args(params)]


def check_races(notebook: Path, races: list[str]) -> None:
    """Each named race is one the chapter's ``%bench`` lines run (read from the file: no child is started to say
    so); the child replays the chapter as far as the last of them (:func:`labmagic.child.replay.load_chapter`)."""
    benched = benched_races(json.loads(notebook.read_text(encoding="utf-8")))
    unknown = [r for r in dict.fromkeys(races) if r not in benched]
    if unknown:
        raise LabError(f"{notebook.stem} has no race {', '.join(map(repr, unknown))} "
                       f"(races its %bench lines run: {', '.join(benched) or 'none'})")


def run(args) -> int:
    notebook = chapter_path(args.chapter)  # a chapter that does not exist: one line naming those that do
    spec = spec_of(args)
    check_races(notebook, spec.races)
    params = parse_params(args.param)
    if args.quick:
        params["size"] = "quick"
    print(f"replaying {notebook.stem} in a child process, then {'checking' if spec.check else 'timing'} "
          f"{', '.join(spec.races) or 'the race its %bench names'}", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="labmagic-bench-") as tmp:
        spec_file = spec.write(Path(tmp) / "spec.json")
        proc = subprocess.run(bench_command(notebook, spec_file, params), capture_output=True, text=True,
                              cwd=repo_root(), env=child_env())
    record = child_record(proc.stdout)
    if not record.get("ok"):
        if record.get("bad_input"):
            raise LabError(record["error"])
        if record:  # the child's own account (a replayed cell's error carries that cell's output), not its traceback
            error = str(record.get("error")).removeprefix("LabError: ")
            raise LabError(f"labmagic bench {notebook.stem}: {error}", detail=record.get("detail") or "")
        raise LabError(f"labmagic bench {notebook.stem}: the child died (exit code {proc.returncode})",
                       detail=log_tail(proc.stderr))
    for race in record["races"]:
        print(race["text"] + "\n")
    if not record["races"]:
        print(f"{notebook.stem}: no named race has the variants and shapes named together; nothing ran")
    for what, paths in (("rows written to", record.get("csv")), ("plots written to", record.get("plots"))):
        if paths:
            print(f"{what} {', '.join(paths)}")
    return 1 if any(race["failed"] for race in record["races"]) else 0
